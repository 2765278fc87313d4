//! [`Utf8Chunks`]: text out of raw chunks for callbacks that want it.

/// Incremental UTF-8 decoding for callbacks that want text: a character split across chunks is
/// held back until it is complete, so a replacement character appears only for bytes that are
/// really invalid.
#[derive(Debug, Default)]
pub struct Utf8Chunks {
    pending: [u8; 4],
    len: usize,
    scratch: Vec<u8>,
}

impl Utf8Chunks {
    /// Feeds `bytes`; `out` receives the text that is complete so far.
    pub fn push(&mut self, bytes: &[u8], mut out: impl FnMut(&str)) {
        self.scratch.clear();
        self.scratch.extend_from_slice(&self.pending[..self.len]);
        self.scratch.extend_from_slice(bytes);
        self.len = 0;
        let mut rest: &[u8] = &self.scratch;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    if !s.is_empty() {
                        out(s);
                    }
                    return;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    if !good.is_empty() {
                        // `valid_up_to` guarantees this prefix is UTF-8.
                        out(std::str::from_utf8(good).unwrap_or_default());
                    }
                    match e.error_len() {
                        Some(n) => {
                            out("\u{fffd}");
                            rest = &bad[n..];
                        }
                        None => {
                            // An incomplete character at the end: keep it for the next chunk.
                            self.pending[..bad.len()].copy_from_slice(bad);
                            self.len = bad.len();
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Ends the stream: a character still incomplete is invalid.
    pub fn finish(&mut self, mut out: impl FnMut(&str)) {
        if self.len > 0 {
            self.len = 0;
            out("\u{fffd}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_split_across_chunks_is_held_back() {
        let text = "héllo → wörld 🎉";
        let bytes = text.as_bytes();
        for split in 0..bytes.len() {
            let mut d = Utf8Chunks::default();
            let mut out = String::new();
            d.push(&bytes[..split], |s| out.push_str(s));
            d.push(&bytes[split..], |s| out.push_str(s));
            d.finish(|s| out.push_str(s));
            assert_eq!(out, text, "split at {split}");
        }
    }

    #[test]
    fn utf8_invalid_bytes_are_replaced() {
        let mut d = Utf8Chunks::default();
        let mut out = String::new();
        d.push(b"a\xffb\xe2\x82", |s| out.push_str(s));
        d.finish(|s| out.push_str(s));
        assert_eq!(out, "a\u{fffd}b\u{fffd}");
    }
}
