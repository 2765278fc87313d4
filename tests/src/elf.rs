//! Just enough of the ELF format to check how an executable is linked: its type (`ET_EXEC`: not
//! position-independent), whether it asks for a program loader (`PT_INTERP`) and which shared
//! libraries it names (`DT_NEEDED`). 64-bit little-endian only (x86_64, aarch64); every offset is
//! bounds-checked, a malformed file fails the test with a clear message.

pub const ET_EXEC: u16 = 2;
pub const PT_DYNAMIC: u32 = 2;
pub const PT_INTERP: u32 = 3;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;

/// One program header: type, file offset, size in the file.
#[derive(Debug, Clone, Copy)]
pub struct Segment {
    pub kind: u32,
    pub offset: usize,
    pub size: usize,
}

#[derive(Debug)]
pub struct Elf {
    pub e_type: u16,
    pub segments: Vec<Segment>,
    /// The number of `DT_NEEDED` entries (shared libraries) in the dynamic segment.
    pub needed: usize,
}

/// `N` bytes at offset `o`, which must be within the file.
fn field<const N: usize>(b: &[u8], o: usize) -> [u8; N] {
    b.get(o..o + N)
        .and_then(|s| s.try_into().ok())
        .expect("ELF field in bounds")
}
fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(field(b, o))
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(field(b, o))
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(field(b, o))
}

/// Parses the header, the program headers and the dynamic segment (if any) of `bytes`.
pub fn parse(bytes: &[u8]) -> Elf {
    assert_eq!(
        bytes.get(..6),
        Some(&b"\x7fELF\x02\x01"[..]),
        "a 64-bit little-endian ELF file"
    );
    let e_type = u16_at(bytes, 0x10);
    let phoff = u64_at(bytes, 0x20) as usize;
    let (phentsize, phnum) = (u16_at(bytes, 0x36) as usize, u16_at(bytes, 0x38) as usize);
    let segments: Vec<Segment> = (0..phnum)
        .map(|i| {
            let o = phoff + i * phentsize;
            Segment {
                kind: u32_at(bytes, o),
                offset: u64_at(bytes, o + 0x08) as usize,
                size: u64_at(bytes, o + 0x20) as usize,
            }
        })
        .collect();
    let needed = segments
        .iter()
        .filter(|s| s.kind == PT_DYNAMIC)
        .flat_map(|s| (0..s.size / 16).map(move |i| s.offset + i * 16))
        .map(|o| u64_at(bytes, o))
        .take_while(|&tag| tag != DT_NULL)
        .filter(|&tag| tag == DT_NEEDED)
        .count();
    Elf {
        e_type,
        segments,
        needed,
    }
}

impl Elf {
    pub fn has(&self, kind: u32) -> bool {
        self.segments.iter().any(|s| s.kind == kind)
    }
}
