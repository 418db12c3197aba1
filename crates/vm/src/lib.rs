//! `wasmsand-vm`: a whole Linux machine as a sandbox. QEMU runs a kernel and a disk image; a
//! small agent inside the guest runs commands and moves files for the host over a
//! virtio-serial port (never the console, which carries the kernel's own messages).
//!
//! - [`Machine`]: one machine — [`Machine::run`] (a command with a time limit, its stdout and
//!   stderr streamed), [`Machine::write_file`] / [`Machine::read_file`] (binary safe),
//!   [`Machine::reset`] (back to the pristine image), [`Machine::status`] (uptime, guest
//!   memory, limit, readiness, acceleration) and [`Machine::shutdown`]; single file-system
//!   operations ([`Machine::stat`], [`Machine::list`], [`Machine::read_range`],
//!   [`Machine::mkdir`], [`Machine::rename`], [`Machine::remove`], [`Machine::walk`]) for the
//!   service's file API. Nothing above this
//!   crate knows QEMU's command line.
//! - [`images`]: the disk image, built from Debian's packages (`sandboxd images build vm`).
//!
//! # How a machine lives
//!
//! The disk image is never written: the guest's disk is a copy-on-write layer over it that
//! QEMU keeps in a temporary file of the machine's own directory (`snapshot=on`), and the root
//! file system is mounted read-only until the machine is saved.
//!
//! A machine boots once per image, memory size and acceleration (the *cold boot*): when the
//! agent answers, the machine is stopped and saved — its RAM as a file (QEMU's guest RAM was
//! that file, mapped shared), its devices as a small migration stream (`x-ignore-shared`
//! leaves the RAM out). Every later start, and every [`Machine::reset`], *restores* that
//! state: a new QEMU maps the RAM file privately (copy-on-write, read lazily, never written)
//! and loads the device state, over a fresh disk layer; the agent then sets the clock,
//! reseeds the kernel's random generator (each restore would otherwise hand out the same
//! numbers) and remounts the root read-write. A restore costs a QEMU start, not a boot.
//!
//! KVM is used when a short probe boot works (the kernel must reach its root mount within a
//! few seconds; a hang is a failure), TCG otherwise; the probe's result is kept per host boot.
//! [`Machine::status`] and [`StartReport`] say which, and why.
//!
//! # The agent
//!
//! `guest/agent.py`, a Python 3 script run by the image's `/usr/lib/wasmsand/init`. Python
//! because the images this runtime is for carry `python3` anyway, its standard library has
//! everything the agent needs (JSON, base64, `poll`, process groups, cgroups through files),
//! and it needs no cross-compilation: a static Rust agent would need the
//! `x86_64-unknown-linux-musl` target, which the pinned toolchain does not have. Its start
//! (about a second under TCG) is paid once, at the cold boot; restored machines find it
//! running.
//!
//! The frames between host and agent are JSON objects, one per line, bytes as base64: see
//! `guest/agent.py`'s docstring for the operations. Each run gets a cgroup of its own inside
//! the guest (pids and memory limits below the agent's share; `cgroup.kill` on its deadline),
//! and the agent and PID 1 are out of the OOM killer's reach. Time limits are enforced twice:
//! by the agent (the run's cgroup is killed, the answer says `timed_out`) and by the host (a
//! guest that has not answered shortly after the deadline is restored, and the answer says so).
//!
//! # What an image must hold
//!
//! A raw ext4 file system image (no partition table) with `/boot/wasmsand/vmlinuz` (a kernel),
//! `/boot/wasmsand/initrd.img` (an initramfs that mounts `/dev/vda` read-only and runs
//! `/usr/lib/wasmsand/init`), `/usr/lib/wasmsand/init` and `/usr/lib/wasmsand/agent.py`, with
//! `/bin/sh`, `mount` and `python3` (3.7 or later). [`images::build`] makes one; docs/vm.md
//! says how to make your own.

#![forbid(unsafe_code)]

mod accel;
mod agent;
mod cpio;
mod fs;
mod image;
pub mod images;
mod machine;
mod qemu;
mod qmp;
mod saved;

pub use accel::{Accel, AccelChoice};
pub use fs::{Entry, WalkEntry};

/// The first line of `qemu --version` (an error naming the package when it cannot run).
pub fn qemu_version(qemu: &std::path::Path) -> Result<String, String> {
    qemu::version(qemu)
}
pub use image::{ImageError, check_image};
pub use machine::{
    Cancel, DEFAULT_MEMORY_MB, MAX_STDIN, MIN_MEMORY_MB, Machine, MachineConfig, RunEnd,
    RunOutcome, RunRequest, StartReport, Status, Stream, VmError,
};
