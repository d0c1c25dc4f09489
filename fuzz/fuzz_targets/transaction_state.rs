//! Fuzz target: `sluice::fuzzing::transaction_state` (see that function and docs/fuzzing.md).
#![no_main]

// The broker's own allocator, so that a hostile length is handled here as in the broker.
#[global_allocator]
static ALLOCATOR: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice::fuzzing::transaction_state(data));
