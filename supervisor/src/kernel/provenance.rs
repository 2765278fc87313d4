//! Provenance (SPEC V1): this build's, embedded at compile time from what `build.rs` found
//! (`refine-build-info`), and a guardian's, read from its executable's `.refine.provenance`
//! section (layout in `refine_protocol::provenance`).
//!
//! A registration records the supervisor's from here and the guardian's from the guardian's
//! own `Hello` (what the running guardian says of itself, `launch::register`), not from a file:
//! a file on disk can be replaced between a read and the `execve`, and a guardian may be
//! unreadable to its launcher. The file is read only where nothing is launched
//! (`refine-supervisor version`, the service's `refine_guardian_build_info`).
//!
//! # Caveats
//! A provenance is a claim of the build that made the file, checked for form (printable,
//! bounded, a hex commit), not for truth: any file can carry the bytes. Its text is escaped
//! before it reaches a terminal like any other.

use std::fs::File;
use std::path::{Path, PathBuf};

use refine_protocol::provenance::{Provenance, LEN, SECTION};
use refine_protocol::{BuildProvenance, DecodeError};

/// This build's provenance.
pub const OWN: Provenance = Provenance::from_build(
    env!("CARGO_PKG_VERSION"),
    env!("REFINE_BUILD_COMMIT"),
    env!("REFINE_BUILD_DIRTY"),
    env!("REFINE_BUILD_CLASS"),
);

/// This build's provenance, as records and documents carry it.
pub fn own() -> BuildProvenance {
    OWN.into()
}

/// Why a guardian's provenance could not be read from its executable.
#[derive(Debug, thiserror::Error)]
pub enum ProvenanceError {
    #[error("cannot open {}", .path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} carries no provenance (not a refine-guardian, or one built before provenance)", .0.display())]
    Missing(PathBuf),
    #[error("the provenance of {} is malformed", .path.display())]
    Malformed {
        path: PathBuf,
        #[source]
        source: DecodeError,
    },
}

/// The provenance the guardian executable at `path` carries.
pub fn of_guardian(path: &Path) -> Result<BuildProvenance, ProvenanceError> {
    let file = File::open(path).map_err(|source| ProvenanceError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let bytes = crate::kernel::nested::section(&file, SECTION, LEN)
        .ok_or_else(|| ProvenanceError::Missing(path.to_path_buf()))?;
    Provenance::decode(&bytes)
        .map(BuildProvenance::from)
        .map_err(|source| ProvenanceError::Malformed {
            path: path.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_build_names_its_package_version() {
        assert_eq!(own().version, env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn a_file_without_the_section_is_missing_and_a_missing_file_cannot_be_opened() {
        assert!(matches!(
            of_guardian(Path::new("/proc/self/exe")),
            Err(ProvenanceError::Missing(_))
        ));
        assert!(matches!(
            of_guardian(Path::new("/nonexistent/refine-guardian")),
            Err(ProvenanceError::Open { .. })
        ));
    }
}
