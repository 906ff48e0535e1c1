// How the worker's process uses glibc's malloc. libtorch takes every CPU
// tensor from malloc, and a training step frees and allocates the same large
// tensors every step (the head's logits, the tied embedding's gradient, a
// block's flat gradient). By default glibc serves a block above its mmap
// threshold (at most 32 MiB) from a private mapping that free() unmaps, and
// trims its heap's free top back to the OS, so the next step faults those
// pages in again, zeroed by the kernel.
#pragma once

namespace tencache {

// Makes malloc keep what is freed for the next allocation: no block is served
// from a private mapping and no heap is trimmed.
// REQUIRES: nothing; safe to call again and from any thread (process-wide).
// GUARANTEES: once a step has run, a step like it faults in no new host pages
// but where the heap still grows as its free blocks settle (now and then, not
// every step); the process's resident memory stays at its peak rather than
// shrinking between steps. Under AddressSanitizer (its own allocator) it
// does nothing.
void KeepFreedHostMemory();

}  // namespace tencache
