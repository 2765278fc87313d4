//! Identities: registrations, runtimes, boots, processes and proof files.
//!
//! A process is never named by a bare pid: a [`ProcessWitness`] is `(pid, start_time)`, where
//! `start_time` is field 22 of `/proc/PID/stat` (clock ticks since boot). Together with the
//! [`BootId`] it names one process of one kernel lifetime; a reused pid has a different start time.

use core::fmt;

macro_rules! id16 {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub [u8; 16]);

        impl $name {
            /// Parses 32 hex digits; dashes are ignored (so a UUID text parses too).
            pub fn parse(text: &str) -> Option<Self> {
                parse_hex16(text).map($name)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(hex16(&self.0, &mut [0; 32]))
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self)
            }
        }

        impl core::str::FromStr for $name {
            type Err = crate::DecodeError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::parse(s).ok_or(crate::DecodeError::InvalidField { field: stringify!($name) })
            }
        }
    };
}

id16!(
    /// One managed launch. Shown as 32 lowercase hex digits; also the file name of its record,
    /// proof, logs and lock under `run/P`.
    RegistrationId
);
id16!(
    /// One runtime (`run/P` directory): receipts of another runtime never verify here.
    RuntimeId
);
id16!(
    /// One kernel lifetime: `/proc/sys/kernel/random/boot_id`.
    BootId
);

/// `bytes` as 32 lowercase hex digits, written into `text` (one `write_str` instead of sixteen
/// formatted writes: ids are formatted into every path of a launch).
fn hex16<'a>(bytes: &[u8; 16], text: &'a mut [u8; 32]) -> &'a str {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (pair, b) in text.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 0xf)];
    }
    // Hex digits are ASCII, so always UTF-8.
    core::str::from_utf8(text).unwrap_or_default()
}

fn parse_hex16(text: &str) -> Option<[u8; 16]> {
    let mut out = [0u8; 16];
    let mut n = 0usize;
    let mut hi: Option<u8> = None;
    for c in text.trim().bytes() {
        if c == b'-' {
            continue;
        }
        let v = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        match hi.take() {
            None => hi = Some(v),
            Some(h) => {
                if n == 16 {
                    return None;
                }
                out[n] = (h << 4) | v;
                n += 1;
            }
        }
    }
    (n == 16 && hi.is_none()).then_some(out)
}

/// A process as the kernel knows it: pid plus start time (`/proc/PID/stat` field 22).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ProcessWitness {
    pub pid: u32,
    /// Clock ticks after boot at which the process started.
    pub start_time: u64,
}

/// The proof file's `(st_dev, st_ino)`: a replaced file (new inode) no longer matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ProofIdentity {
    pub dev: u64,
    pub ino: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_uuid_and_hex() {
        let b = BootId::parse("0123abcd-4567-89ef-0123-456789abcdef\n").unwrap();
        assert_eq!(b.0[0], 0x01);
        assert_eq!(b.0[15], 0xef);
        let r = RegistrationId([0xab; 16]);
        let text = format!("{r}");
        assert_eq!(text.len(), 32);
        assert_eq!(RegistrationId::parse(&text), Some(r));
        assert_eq!(RegistrationId::parse("abc"), None);
        assert_eq!(RegistrationId::parse(&"0".repeat(34)), None);
        assert_eq!(RegistrationId::parse(&"g".repeat(32)), None);
        let mut bytes = [0u8; 16];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = ((i as u8) * 17) ^ 0x0f;
        }
        let expected: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(RuntimeId(bytes).to_string(), expected);
    }
}
