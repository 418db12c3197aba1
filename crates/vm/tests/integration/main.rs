//! wasmsand-vm against real QEMU and the image `sandboxd images build vm` makes (the `vm`
//! stage of scripts/test.sh builds it and names it in `WASMSAND_TEST_VM_IMAGE`). Without
//! that variable these print "skipped": the cargo stage has no image.
//!
//! Every test starts its own machine, but all of them restore one saved machine, kept in
//! `WASMSAND_TEST_VM_STATE` (default: this target's tmpdir): the first test to get there
//! boots and saves it, the others wait for it and restore.

mod common;
mod files;
#[path = "../../../../tests/support/host_tools.rs"]
mod host_tools;
mod hostile;
mod images;
mod runs;
