//! The host side of WASI: how the sandbox appears to wasmer-wasix and what the runner puts in
//! place of the wasix imports that get it wrong.
//!
//! - `fs`: the `Vfs` as wasix's `FileSystem`; `file`: blocking file objects adapted to wasix's
//!   async `VirtualFile`, and the errno slot their failures land in; `stdio`: a guest's standard
//!   streams (capped buffers, bounded pipes, cancel tokens, SIGPIPE). No cycle: `fs → stdio →
//!   file`.
//! - `clock` (deterministic `clock_time_get` / `random_get`), `poll` (`poll_oneoff` with a zero
//!   timeout), `modes` (`wasmsand.path_meta` and `path_filestat_set_times`): imports defined or
//!   patched by the runner (`wrap.rs`, `prepared.rs`); `links` (`path_link` through the tree, and the link
//!   counts and shared inode numbers of hard links in `path_filestat_get`); `paths`
//!   (`path_remove_directory` and `path_rename` where wasix's inode cache gets them wrong);
//!   `fds` (the caps on open descriptors, counted from `path_open`, `fd_close` and
//!   `fd_renumber`); `args` (`args_*` and `environ_*`, from the run's binding); `exit`
//!   (`proc_exit` without the backtrace wasmer would take for it).
//!
//! Of the runner these modules know only `guard` (the instance's memory once it exists, when
//! a host function may call back into the guest) and `bind` (the run an instance serves,
//! known after the instance is made); not the watchdog, the module cache or the tool-call
//! channel.

pub(crate) mod args;
pub(crate) mod clock;
pub(crate) mod exit;
pub mod fds;
pub(crate) mod file;
pub(crate) mod fs;
pub(crate) mod links;
pub(crate) mod modes;
pub(crate) mod paths;
pub(crate) mod poll;
pub mod stdio;
