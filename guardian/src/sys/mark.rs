//! The identity this binary carries (SPEC D4, layout in `refine_protocol_core::mark`): an outer stop
//! reads it from `/proc/PID/exe` to recognise a nested guardian of any copy, version or path.
//! Nothing reads it at run time; `#[used]` keeps it through LTO and the linker's section GC.

/// Placed in a section of its own so that a reader finds it by name in the section headers.
// SAFETY (`link_section`): the section name is unique to this one static, so nothing else is
// placed in or overlaps it, and it holds plain bytes that are never executed.
#[used]
#[link_section = ".refine.guardian"]
static MARK: [u8; refine_protocol_core::mark::MARK_LEN] = refine_protocol_core::mark::MARK;
