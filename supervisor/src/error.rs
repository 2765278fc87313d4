//! Errors as one line: [`error_chain`] prints an error and its causes, each once.

/// An error and its sources on one line (`op: cause: cause`), for JSON documents and logs.
/// Each link is printed once: a message names its operation and leaves its cause to
/// [`source`](std::error::Error::source), never both.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_chain;
    use std::path::PathBuf;

    /// Three links, the outer one's text already holding the innermost one's words.
    #[derive(Debug, thiserror::Error)]
    #[error("stop of 0123 not proven: timed out")]
    struct Outer(#[source] Middle);
    #[derive(Debug, thiserror::Error)]
    #[error("the grace ran out")]
    struct Middle(#[source] Inner);
    #[derive(Debug, thiserror::Error)]
    #[error("timed out")]
    struct Inner;

    #[test]
    fn each_cause_is_printed_once_in_order() {
        assert_eq!(
            error_chain(&Outer(Middle(Inner))),
            "stop of 0123 not proven: timed out: the grace ran out: timed out"
        );
    }

    /// The library's messages name their operation and leave the cause to `source()`.
    #[test]
    fn a_registry_error_says_its_cause_once() {
        let e = crate::store::registry::RegistryError::Io {
            op: "read",
            path: PathBuf::from("/run/x"),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        };
        let text = error_chain(&e);
        assert_eq!(
            text.matches("No such file or directory").count(),
            1,
            "{text}"
        );
        assert!(text.starts_with("read /run/x: No such file"), "{text}");
    }
}
