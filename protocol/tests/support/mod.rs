//! A counting global allocator for the test binaries that measure what a decode allocates (each
//! integration test file is its own binary, so this allocator affects only those that include
//! this module), and the bound every decode is held to.
//!
//! The bound's multiple is what a decoded value itself costs: a one-byte empty string in a record
//! is a 24-byte `String` in memory, a two-byte map entry about 50 bytes of B-tree node; the densest
//! valid records measure about 31 bytes per input byte. A length field is never trusted.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

fn charge(bytes: usize) {
    // `try_with`: the allocator also runs while thread-locals are torn down.
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = ALLOCATED.try_with(|a| a.set(a.get().saturating_add(bytes)));
        }
    });
}

// SAFETY: every method forwards to `System` with the caller's own arguments; the counting
// touches only const-initialised thread-locals (no allocation, no re-entry).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        charge(layout.size());
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        charge(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        charge(new_size.saturating_sub(layout.size()));
        // SAFETY: as for `dealloc`; `new_size` is the caller's, checked by its contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The bytes `f` asks the allocator for on this thread.
pub fn allocated_by<T>(f: impl FnOnce() -> T) -> (T, usize) {
    ALLOCATED.with(|a| a.set(0));
    COUNTING.with(|on| on.set(true));
    let out = f();
    COUNTING.with(|on| on.set(false));
    (out, ALLOCATED.with(|a| a.get()))
}

/// The bound every decode is held to.
pub const PER_INPUT_BYTE: usize = 64;
pub const CONSTANT: usize = 4096;

pub fn bound(input: usize) -> usize {
    CONSTANT + PER_INPUT_BYTE * input
}
