//! A global allocator that keeps a hostile length from aborting the process.
//!
//! kafka-protocol 0.18 decodes an array by calling `Vec::with_capacity(n)` with `n` read off the
//! wire, before checking that `n` elements could fit in the frame. A 20-byte
//! Metadata request announcing 2^31 topics asks for hundreds of gigabytes at once; the kernel
//! refuses, and Rust aborts the whole broker. No valid request needs anything near 1 GiB in one
//! allocation (frames are capped by `socket.request.max.bytes`), so allocations that large are
//! served from address space reserved with `MAP_NORESERVE`: the reservation succeeds, the
//! decoder fails on the missing bytes a moment later, and the untouched mapping is returned
//! without ever being backed by memory. Everything else goes to the system allocator.

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations at least this large are reserved, not committed.
const RESERVE_THRESHOLD_BYTES: usize = 1 << 30;
/// mmap returns page-aligned memory; larger alignments go to the system allocator.
const PAGE_BYTES: usize = 4096;

pub struct GuardedAllocator;

fn is_reserved(layout: &Layout) -> bool {
    layout.size() >= RESERVE_THRESHOLD_BYTES && layout.align() <= PAGE_BYTES
}

// SAFETY: every pointer handed out is either from `System` or from an anonymous private
// mapping of at least `layout.size()` bytes, page aligned (>= layout.align()); each is released
// by the same mechanism, chosen by the same size test on the same layout.
unsafe impl GlobalAlloc for GuardedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_reserved(&layout) {
            reserve(layout.size())
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_reserved(&layout) {
            reserve(layout.size()) // anonymous mappings are zero-filled
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_reserved(&layout) {
            libc::munmap(ptr.cast(), layout.size());
        } else {
            System.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        if !is_reserved(&layout) && !is_reserved(&new_layout) {
            return System.realloc(ptr, layout, new_size);
        }
        let new_ptr = self.alloc(new_layout);
        if !new_ptr.is_null() {
            std::ptr::copy_nonoverlapping(ptr, new_ptr, layout.size().min(new_size));
            self.dealloc(ptr, layout);
        }
        new_ptr
    }
}

unsafe fn reserve(size: usize) -> *mut u8 {
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
    let ptr = libc::mmap(
        std::ptr::null_mut(),
        size,
        libc::PROT_READ | libc::PROT_WRITE,
        flags,
        -1,
        0,
    );
    if ptr == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        ptr.cast()
    }
}
