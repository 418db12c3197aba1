//! The builtins: everything bash does in its own process, run here in the host.
//!
//! [`BUILTINS`] is the registry: each builtin's name, handler, kind (special, declaration)
//! and `help` line. The handlers are `Interp` methods, one file per family:
//!
//! - `flow.rs`: `exit`, `return`, `break`, `continue`, `eval`, `source`/`.`, `exec`,
//!   `bash`/`sh`;
//! - `args.rs`: `shift`, `getopts`;
//! - `vars.rs`: `declare`/`typeset`/`local`/`export`/`readonly`, `unset`, `let`, and how
//!   variables print (`declare -p`, `${x@A}`);
//! - `io.rs`: `echo`, `printf`, `read`, `mapfile`/`readarray`;
//! - `test.rs`: `test`/`[`;
//! - `dirs.rs`: `cd`, `pwd`, `pushd`, `popd`, `dirs`;
//! - `options.rs`: `set`, `shopt` (and the option accessors the interpreter uses);
//! - `signals.rs`: `trap`, `kill`;
//! - `meta.rs`: `type`, `command`, `builtin`, `enable`, `help`, `alias`, `unalias`, `history`;
//! - `limits.rs`: `ulimit`, `umask`, `times`;
//! - `programs.rs`: `env`, `xargs`, `chmod`, `sleep` (programs in bash, builtins here);
//! - `system.rs`: `whoami`, `id`, `hostname`, `uname` (programs too, answered for the
//!   sandbox rather than the host).
//!
//! The job builtins (`jobs`, `wait`, `disown`, `nohup`, `setsid`) are in `crate::jobs`,
//! `timeout` and `which` in `crate::timeout`.

mod args;
mod bind;
mod complete;
mod dirs;
mod flow;
mod io;
mod limits;
mod meta;
mod options;
mod programs;
mod signals;
pub(crate) mod system;
mod test;
mod vars;

use crate::execute::DeclArg;
use crate::interp::{FlowResult, Interp};

/// A builtin's code: the interpreter, the name it was called by (`mapfile`/`readarray` and
/// the declaration builtins share one) and the arguments after the name.
type Handler = fn(&mut Interp, &str, &[String]) -> FlowResult;

/// One builtin: the single place that says what the shell provides itself. Dispatch
/// (`Interp::run_builtin`), lookup (`type`, `command -v/-V`, `builtin`, `$PATH` search),
/// the parser's assignment-word rule and `help` all read the registry, `BUILTINS`.
#[derive(Debug, Clone, Copy)]
pub struct Builtin {
    /// The command name.
    pub name: &'static str,
    /// A special builtin as bash 5.2 marks them: POSIX's (`break : . continue eval exec exit
    /// export readonly return set shift times trap unset`) and `source` (`enable -s`).
    pub special: bool,
    /// A declaration builtin (`declare`, `typeset`, `local`, `export`, `readonly`): its
    /// arguments that look like assignments are parsed as assignments (`local a=(1 2)`,
    /// `export x=$y` without word splitting).
    pub declaration: bool,
    /// A command that is a program in bash (`env`, `xargs`, `chmod`, `sleep`, `timeout`,
    /// `which`, `nohup`, `setsid`, `bash`, `sh`), a builtin here because a WASI program can
    /// neither start another program nor change permission bits. `type` and `command -v`
    /// show the file bash would run when `$PATH` has one; it still runs as the builtin.
    pub program: bool,
    /// What `help -s NAME` prints, as bash 5.2 does. `None` for the programs above and for
    /// `kill`, whose help text is not carried.
    pub synopsis: Option<&'static str>,
    run: Handler,
}

const fn regular(name: &'static str, synopsis: Option<&'static str>, run: Handler) -> Builtin {
    Builtin {
        name,
        special: false,
        declaration: false,
        program: false,
        synopsis,
        run,
    }
}

/// A builtin standing in for a program of bash's system (see [`Builtin::program`]).
const fn program(name: &'static str, run: Handler) -> Builtin {
    Builtin {
        program: true,
        ..regular(name, None, run)
    }
}

const fn special(name: &'static str, synopsis: Option<&'static str>, run: Handler) -> Builtin {
    Builtin {
        special: true,
        ..regular(name, synopsis, run)
    }
}

const fn declaration(name: &'static str, synopsis: Option<&'static str>, run: Handler) -> Builtin {
    Builtin {
        declaration: true,
        ..regular(name, synopsis, run)
    }
}

const fn special_declaration(
    name: &'static str,
    synopsis: Option<&'static str>,
    run: Handler,
) -> Builtin {
    Builtin {
        special: true,
        declaration: true,
        ..regular(name, synopsis, run)
    }
}

/// Every builtin, sorted by name (looked up by binary search).
static BUILTINS: &[Builtin] = &[
    special(".", Some(". filename [arguments]"), |i, n, a| {
        i.b_source(n, a)
    }),
    special(":", Some(":"), |_, _, _| Ok(0)),
    regular("[", Some("[ arg... ]"), |i, _, a| Ok(i.b_test(a, true))),
    regular(
        "alias",
        Some("alias [-p] [name[=value] ... ]"),
        |i, _, a| Ok(i.b_alias(a)),
    ),
    program("bash", |i, n, a| i.b_bash(n, a)),
    regular("bg", Some("bg [job_spec ...]"), |i, n, a| i.b_fg_bg(n, a)),
    regular(
        "bind",
        Some(
            "bind [-lpsvPSVX] [-m keymap] [-f filename] [-q name] [-u name] [-r keyseq] [-x keyseq:shell-command] [keyseq:readline-function or readline-command]",
        ),
        |i, _, a| i.b_bind(a),
    ),
    special("break", Some("break [n]"), |i, n, a| i.b_loop_control(n, a)),
    regular(
        "builtin",
        Some("builtin [shell-builtin [arg ...]]"),
        |i, _, a| i.b_builtin(a),
    ),
    regular("caller", Some("caller [expr]"), |i, _, a| Ok(i.b_caller(a))),
    regular("cd", Some("cd [-L|[-P [-e]] [-@]] [dir]"), |i, _, a| {
        Ok(i.b_cd(a))
    }),
    program("chmod", |i, _, a| Ok(i.b_chmod(a))),
    regular(
        "command",
        Some("command [-pVv] command [arg ...]"),
        |i, _, a| i.b_command(a),
    ),
    regular(
        "compgen",
        Some(
            "compgen [-abcdefgjksuv] [-o option] [-A action] [-G globpat] [-W wordlist] [-F function] [-C command] [-X filterpat] [-P prefix] [-S suffix] [word]",
        ),
        |i, _, a| i.b_compgen(a),
    ),
    regular(
        "complete",
        Some(
            "complete [-abcdefgjksuv] [-pr] [-DEI] [-o option] [-A action] [-G globpat] [-W wordlist] [-F function] [-C command] [-X filterpat] [-P prefix] [-S suffix] [name ...]",
        ),
        |i, _, a| Ok(i.b_complete(a)),
    ),
    regular(
        "compopt",
        Some("compopt [-o|+o option] [-DEI] [name ...]"),
        |i, _, a| Ok(i.b_compopt(a)),
    ),
    special("continue", Some("continue [n]"), |i, n, a| {
        i.b_loop_control(n, a)
    }),
    declaration(
        "declare",
        Some("declare [-aAfFgiIlnrtux] [name[=value] ...] or declare -p [-aAfFilnrtux] [name ...]"),
        declaration_args,
    ),
    regular("dirs", Some("dirs [-clpv] [+N] [-N]"), |i, _, a| {
        Ok(i.b_dirs(a))
    }),
    regular(
        "disown",
        Some("disown [-h] [-ar] [jobspec ... | pid ...]"),
        |i, _, a| Ok(i.b_disown(a)),
    ),
    regular("echo", Some("echo [-neE] [arg ...]"), |i, _, a| {
        Ok(i.b_echo(a))
    }),
    regular(
        "enable",
        Some("enable [-a] [-dnps] [-f filename] [name ...]"),
        |i, _, a| Ok(i.b_enable(a)),
    ),
    program("env", |i, _, a| i.b_env(a)),
    special("eval", Some("eval [arg ...]"), |i, _, a| i.b_eval(a)),
    special(
        "exec",
        Some("exec [-cl] [-a name] [command [argument ...]] [redirection ...]"),
        |i, _, a| i.b_exec(a),
    ),
    special("exit", Some("exit [n]"), |i, _, a| i.b_exit(a)),
    special_declaration(
        "export",
        Some("export [-fn] [name[=value] ...] or export -p"),
        declaration_args,
    ),
    regular("false", Some("false"), |_, _, _| Ok(1)),
    regular(
        "fc",
        Some("fc [-e ename] [-lnr] [first] [last] or fc -s [pat=rep] [command]"),
        |i, _, a| i.b_fc(a),
    ),
    regular("fg", Some("fg [job_spec]"), |i, n, a| i.b_fg_bg(n, a)),
    regular(
        "getopts",
        Some("getopts optstring name [arg ...]"),
        |i, _, a| Ok(i.b_getopts(a)),
    ),
    regular(
        "hash",
        Some("hash [-lr] [-p pathname] [-dt] [name ...]"),
        |i, _, a| Ok(i.b_hash(a)),
    ),
    regular("help", Some("help [-dms] [pattern ...]"), |i, _, a| {
        Ok(i.b_help(a))
    }),
    regular(
        "history",
        Some(
            "history [-c] [-d offset] [n] or history -anrw [filename] or history -ps arg [arg...]",
        ),
        |i, _, a| i.b_history(a),
    ),
    program("hostname", |i, _, a| Ok(i.b_hostname(a))),
    program("id", |i, _, a| Ok(i.b_id(a))),
    regular(
        "jobs",
        Some("jobs [-lnprs] [jobspec ...] or jobs -x command [args]"),
        |i, _, a| Ok(i.b_jobs(a)),
    ),
    regular(
        "kill",
        Some("kill [-s sigspec | -n signum | -sigspec] pid | jobspec ... or kill -l [sigspec]"),
        |i, _, a| i.b_kill(a),
    ),
    regular("let", Some("let arg [arg ...]"), |i, _, a| i.b_let(a)),
    declaration(
        "local",
        Some("local [option] name[=value] ..."),
        declaration_args,
    ),
    regular("logout", Some("logout [n]"), |i, _, a| i.b_logout(a)),
    regular(
        "mapfile",
        Some(
            "mapfile [-d delim] [-n count] [-O origin] [-s count] [-t] [-u fd] [-C callback] [-c quantum] [array]",
        ),
        |i, n, a| i.b_mapfile(n, a),
    ),
    program("nohup", |i, n, a| i.b_nohup(n, a)),
    regular("popd", Some("popd [-n] [+N | -N]"), |i, _, a| {
        Ok(i.b_popd(a))
    }),
    regular(
        "printf",
        Some("printf [-v var] format [arguments]"),
        |i, _, a| i.b_printf(a),
    ),
    regular("pushd", Some("pushd [-n] [+N | -N | dir]"), |i, _, a| {
        Ok(i.b_pushd(a))
    }),
    regular("pwd", Some("pwd [-LP]"), |i, _, a| Ok(i.b_pwd(a))),
    regular(
        "read",
        Some(
            "read [-ers] [-a array] [-d delim] [-i text] [-n nchars] [-N nchars] [-p prompt] [-t timeout] [-u fd] [name ...]",
        ),
        |i, _, a| i.b_read(a),
    ),
    regular(
        "readarray",
        Some(
            "readarray [-d delim] [-n count] [-O origin] [-s count] [-t] [-u fd] [-C callback] [-c quantum] [array]",
        ),
        |i, n, a| i.b_mapfile(n, a),
    ),
    special_declaration(
        "readonly",
        Some("readonly [-aAf] [name[=value] ...] or readonly -p"),
        declaration_args,
    ),
    special("return", Some("return [n]"), |i, _, a| i.b_return(a)),
    special(
        "set",
        Some("set [-abefhkmnptuvxBCEHPT] [-o option-name] [--] [-] [arg ...]"),
        |i, _, a| Ok(i.b_set(a)),
    ),
    program("setsid", |i, n, a| i.b_nohup(n, a)),
    program("sh", |i, n, a| i.b_bash(n, a)),
    special("shift", Some("shift [n]"), |i, _, a| i.b_shift(a)),
    regular(
        "shopt",
        Some("shopt [-pqsu] [-o] [optname ...]"),
        |i, _, a| Ok(i.b_shopt(a)),
    ),
    program("sleep", |i, _, a| i.b_sleep(a)),
    special("source", Some("source filename [arguments]"), |i, n, a| {
        i.b_source(n, a)
    }),
    regular(
        "suspend",
        Some("suspend [-f]"),
        |i, _, a| Ok(i.b_suspend(a)),
    ),
    regular(
        "test",
        Some("test [expr]"),
        |i, _, a| Ok(i.b_test(a, false)),
    ),
    // GNU time's program (`command time`, `env time`, `/usr/bin/time`); the `time` keyword
    // stays the shell's.
    program("time", |i, _, a| i.b_time_program(a)),
    program("timeout", |i, _, a| i.b_timeout(a)),
    special("times", Some("times"), |i, _, _| Ok(i.b_times())),
    special(
        "trap",
        Some("trap [-lp] [[arg] signal_spec ...]"),
        |i, _, a| Ok(i.b_trap(a)),
    ),
    regular("true", Some("true"), |_, _, _| Ok(0)),
    program("tty", |i, _, a| Ok(i.b_tty(a))),
    regular("type", Some("type [-afptP] name [name ...]"), |i, _, a| {
        Ok(i.b_type(a))
    }),
    declaration(
        "typeset",
        Some("typeset [-aAfFgiIlnrtux] name[=value] ... or typeset -p [-aAfFilnrtux] [name ...]"),
        declaration_args,
    ),
    regular(
        "ulimit",
        Some("ulimit [-SHabcdefiklmnpqrstuvxPRT] [limit]"),
        |i, _, a| Ok(i.b_ulimit(a)),
    ),
    regular("umask", Some("umask [-p] [-S] [mode]"), |i, _, a| {
        Ok(i.b_umask(a))
    }),
    regular(
        "unalias",
        Some("unalias [-a] name [name ...]"),
        |i, _, a| Ok(i.b_unalias(a)),
    ),
    program("uname", |i, _, a| Ok(i.b_uname(a))),
    special(
        "unset",
        Some("unset [-f] [-v] [-n] [name ...]"),
        |i, _, a| Ok(i.b_unset(a)),
    ),
    regular("wait", Some("wait [-fn] [-p var] [id ...]"), |i, _, a| {
        i.b_wait(a)
    }),
    program("which", |i, _, a| Ok(i.b_which(a))),
    program("whoami", |i, _, a| Ok(i.b_whoami(a))),
    program("xargs", |i, _, a| i.b_xargs(a)),
];

/// The declaration builtins share one implementation, told apart by name.
fn declaration_args(i: &mut Interp, name: &str, args: &[String]) -> FlowResult {
    let dargs = args.iter().cloned().map(DeclArg::Plain).collect();
    i.run_declaration(name, dargs)
}

/// The builtins that stand in for programs ([`Builtin::program`]).
pub(crate) fn program_names() -> impl Iterator<Item = &'static str> {
    BUILTINS.iter().filter(|b| b.program).map(|b| b.name)
}

/// The builtin called `name`, if the shell has one.
pub(crate) fn lookup(name: &str) -> Option<&'static Builtin> {
    BUILTINS
        .binary_search_by(|b| b.name.cmp(name))
        .ok()
        .map(|i| &BUILTINS[i])
}

pub(crate) fn is_builtin(name: &str) -> bool {
    lookup(name).is_some()
}

/// Every builtin, sorted by name: the commands the shell provides itself, which are never
/// looked up as files.
pub fn builtin_table() -> &'static [Builtin] {
    BUILTINS
}

impl Interp {
    /// Whether `name` is a special builtin (see [`Builtin::special`]). The executor asks the
    /// registry through `Interp`, as it runs builtins, so that it names nothing of this layer
    /// above it.
    pub(crate) fn is_special_builtin(&self, name: &str) -> bool {
        lookup(name).is_some_and(|b| b.special)
    }

    /// A builtin here for what is a program in bash ([`Builtin::program`]): `type` and
    /// `command -v` show the file bash would run when `$PATH` has one.
    pub(crate) fn is_program_builtin(&self, name: &str) -> bool {
        lookup(name).is_some_and(|b| b.program)
    }

    /// Whether `name` is a declaration builtin (see [`Builtin::declaration`]).
    pub(crate) fn is_declaration_builtin(&self, name: &str) -> bool {
        lookup(name).is_some_and(|b| b.declaration)
    }

    /// Whether `name` runs as a builtin: one the shell has and `enable -n` has not turned
    /// off (a turned-off name is looked up along `$PATH` like any program).
    pub(crate) fn builtin_enabled(&self, name: &str) -> bool {
        is_builtin(name) && !self.st.disabled_builtins.contains(name)
    }

    /// Runs the builtin `name` (`argv[0]` is the name as written).
    pub(crate) fn run_builtin(&mut self, name: &str, argv: &[String]) -> FlowResult {
        self.check()?;
        match lookup(name) {
            Some(b) => (b.run)(self, name, &argv[1..]),
            None => {
                self.err(&format!("{name}: not implemented"));
                Ok(2)
            }
        }
    }

    /// Bash's check for builtins that take no options (`eval`, `source`, `builtin`): a
    /// leading `--` is skipped, any other word starting with `-` (but `-` itself) is an
    /// invalid option, a usage error (status 2).
    fn no_options<'a>(&mut self, name: &str, args: &'a [String]) -> Result<&'a [String], i32> {
        match args.first().map(|s| s.as_str()) {
            Some("--") => Ok(&args[1..]),
            Some(a) if a.len() > 1 && a.starts_with('-') => {
                self.err(&format!("{name}: {a}: invalid option"));
                self.usage(name);
                Err(2)
            }
            _ => Ok(args),
        }
    }

    /// Splits a builtin's arguments into its single-letter options and its operands, as
    /// bash's option parser does for the builtins without option arguments: leading words
    /// `-xyz` give their letters in order, `--` ends them, and `-` alone or the first other
    /// word starts the operands. A letter not in `allowed` is `NAME: -c: invalid option`
    /// plus the usage line, status 2.
    fn short_options<'a>(
        &mut self,
        name: &str,
        args: &'a [String],
        allowed: &str,
    ) -> Result<(Vec<char>, &'a [String]), i32> {
        let mut letters = Vec::new();
        for (i, a) in args.iter().enumerate() {
            if a == "--" {
                return Ok((letters, &args[i + 1..]));
            }
            let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) else {
                return Ok((letters, &args[i..]));
            };
            for c in flags.chars() {
                if !allowed.contains(c) {
                    self.err(&format!("{name}: -{c}: invalid option"));
                    self.usage(name);
                    return Err(2);
                }
                letters.push(c);
            }
        }
        Ok((letters, &[]))
    }

    /// `NAME: usage: SYNOPSIS` on stderr, as bash follows a usage error.
    pub(crate) fn usage(&mut self, name: &str) {
        if let Some(syn) = lookup(name).and_then(|b| b.synopsis) {
            self.err_raw(&format!("{name}: usage: {syn}\n"));
        }
    }

    pub(crate) fn out_str(&mut self, s: &str) -> i32 {
        match self.out(&wasmsand_exec::raw::encode(s)) {
            Ok(()) => 0,
            Err(st) => st,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::BUILTINS;

    #[test]
    fn registry_is_sorted_for_binary_search() {
        for w in BUILTINS.windows(2) {
            assert!(w[0].name < w[1].name, "{} before {}", w[0].name, w[1].name);
        }
    }

    #[test]
    fn every_synopsis_starts_with_its_name() {
        for b in BUILTINS {
            if let Some(s) = b.synopsis {
                assert!(s.starts_with(b.name), "{}: {s}", b.name);
            }
        }
    }

    #[test]
    fn declaration_builtins_are_the_syntax_list() {
        let marked: Vec<&str> = BUILTINS
            .iter()
            .filter(|b| b.declaration)
            .map(|b| b.name)
            .collect();
        assert_eq!(marked, crate::syntax::DECLARATION_COMMANDS);
    }
}
