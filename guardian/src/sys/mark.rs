//! The identity this binary carries (SPEC D4, layout in `refine_protocol_core::mark`): an outer stop
//! reads it from `/proc/PID/exe` to recognise a nested guardian of any copy, version or path.
//! Nothing reads it at run time; `#[used]` keeps it through LTO and the linker's section GC.

/// Placed in a section of its own so that a reader finds it by name in the section headers.
// SAFETY (`link_section`): the section name is unique to this one static, so nothing else is
// placed in or overlaps it, and it holds plain bytes that are never executed.
#[used]
#[link_section = ".refine.guardian"]
static MARK: [u8; refine_protocol_core::mark::MARK_LEN] = refine_protocol_core::mark::MARK;

/// This build's provenance (V1, layout in `refine_protocol_core::provenance`): what the build
/// script found (`build.rs`). The guardian sends it in its `Hello`, which is what a
/// registration records; a reader that has not launched it (`refine-supervisor version`) reads
/// this section from the file.
pub const PROVENANCE: refine_protocol_core::provenance::Provenance =
    refine_protocol_core::provenance::Provenance::from_build(
        env!("CARGO_PKG_VERSION"),
        env!("REFINE_BUILD_COMMIT"),
        env!("REFINE_BUILD_DIRTY"),
        env!("REFINE_BUILD_CLASS"),
    );

/// [`PROVENANCE`]'s bytes, in a section of their own (found by name, as the mark is).
// SAFETY (`link_section`): the section name is unique to this one static, so nothing else is
// placed in or overlaps it, and it holds plain bytes that are never executed.
#[used]
#[link_section = ".refine.provenance"]
static PROVENANCE_SECTION: [u8; refine_protocol_core::provenance::LEN] = *PROVENANCE.as_bytes();
