//! What a program asks to learn whose machine it runs on — `whoami`, `id`, `hostname`,
//! `uname` — answered for the sandbox (one unprivileged user, uid 1000, on a machine named
//! by `$HOSTNAME`) rather than for the host. Agents run these first to find their bearings;
//! a WASI program has no user or kernel to ask.

use crate::interp::Interp;

/// The sandbox's one user and its group.
pub(crate) const USER: (u32, &str) = (1000, "user");
/// The kernel `uname` reports: the one bash's `$OSTYPE` and `$MACHTYPE` describe.
const KERNEL: &str = "Linux";
const RELEASE: &str = "6.1.0-wasmsand";
const VERSION: &str = "#1 SMP";
const MACHINE: &str = "x86_64";

impl Interp {
    /// A GNU tool's complaint about its arguments, with its usual hint.
    fn tool_usage_error(&mut self, tool: &str, msg: &str) -> i32 {
        self.err_raw(&format!(
            "{tool}: {msg}\nTry '{tool} --help' for more information.\n"
        ));
        1
    }

    /// The short option letters of `args` (each must be one of `allowed`) and the operands;
    /// `Err` is the status after the complaint.
    fn tool_options(
        &mut self,
        tool: &str,
        args: &[String],
        allowed: &str,
        long: &[(&str, char)],
    ) -> Result<(Vec<char>, Vec<String>), i32> {
        let mut letters = Vec::new();
        let mut operands = Vec::new();
        let mut options_done = false;
        for a in args {
            if options_done || a == "-" || !a.starts_with('-') {
                operands.push(a.clone());
            } else if a == "--" {
                options_done = true;
            } else if let Some(name) = a.strip_prefix("--") {
                match long.iter().find(|(l, _)| *l == name) {
                    Some((_, c)) => letters.push(*c),
                    None => {
                        return Err(
                            self.tool_usage_error(tool, &format!("unrecognized option '{a}'"))
                        );
                    }
                }
            } else {
                for c in a[1..].chars() {
                    if !allowed.contains(c) {
                        return Err(
                            self.tool_usage_error(tool, &format!("invalid option -- '{c}'"))
                        );
                    }
                    letters.push(c);
                }
            }
        }
        Ok((letters, operands))
    }

    /// The machine's name: `$HOSTNAME`, `sandbox` without one.
    pub(crate) fn host_name(&self) -> String {
        self.get_var("HOSTNAME")
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "sandbox".into())
    }

    /// `tty`: the sandbox gives no program a terminal, so standard input is never one. GNU's
    /// statuses: 1 for not a terminal, 2 for a usage error, 3 for a failed write.
    pub(super) fn b_tty(&mut self, args: &[String]) -> i32 {
        let long = [
            ("silent", 's'),
            ("quiet", 's'),
            ("help", 'h'),
            ("version", 'V'),
        ];
        let (letters, operands) = match self.tool_options("tty", args, "s", &long) {
            Ok(o) => o,
            Err(_) => return 2,
        };
        if letters.contains(&'h') {
            return self.out_str(TTY_HELP);
        }
        if letters.contains(&'V') {
            return self.out_str(&coreutils_version("tty", "David MacKenzie"));
        }
        if let Some(extra) = operands.first() {
            self.tool_usage_error("tty", &format!("extra operand \u{2018}{extra}\u{2019}"));
            return 2;
        }
        if letters.is_empty() && self.out_str("not a tty\n") != 0 {
            return 3;
        }
        1
    }

    pub(super) fn b_whoami(&mut self, args: &[String]) -> i32 {
        let (_, operands) = match self.tool_options("whoami", args, "", &[]) {
            Ok(o) => o,
            Err(s) => return s,
        };
        if let Some(extra) = operands.first() {
            return self.tool_usage_error("whoami", &format!("extra operand '{extra}'"));
        }
        self.out_str(&format!("{}\n", USER.1))
    }

    pub(super) fn b_id(&mut self, args: &[String]) -> i32 {
        let long = [
            ("user", 'u'),
            ("group", 'g'),
            ("groups", 'G'),
            ("name", 'n'),
            ("real", 'r'),
        ];
        let (letters, operands) = match self.tool_options("id", args, "ugGnr", &long) {
            Ok(o) => o,
            Err(s) => return s,
        };
        if operands.len() > 1 {
            return self.tool_usage_error("id", &format!("extra operand '{}'", operands[1]));
        }
        let (uid, name) = match operands.first().map(String::as_str) {
            None => USER,
            Some(n) if n == USER.1 || n == "1000" => USER,
            Some("root" | "0") => (0, "root"),
            Some(n) => {
                self.err_raw(&format!("id: '{n}': no such user\n"));
                return 1;
            }
        };
        let names = letters.contains(&'n');
        let which: Vec<char> = letters
            .iter()
            .copied()
            .filter(|c| matches!(c, 'u' | 'g' | 'G'))
            .collect();
        if which.len() > 1 {
            self.err_raw("id: cannot print \"only\" of more than one choice\n");
            return 1;
        }
        let text = match which.first() {
            None if names || letters.contains(&'r') => {
                self.err_raw("id: cannot print only names or real IDs in default format\n");
                return 1;
            }
            None => format!("uid={uid}({name}) gid={uid}({name}) groups={uid}({name})\n"),
            Some(_) if names => format!("{name}\n"),
            Some(_) => format!("{uid}\n"),
        };
        self.out_str(&text)
    }

    pub(super) fn b_hostname(&mut self, args: &[String]) -> i32 {
        let long = [
            ("short", 's'),
            ("fqdn", 'f'),
            ("long", 'f'),
            ("domain", 'd'),
            ("ip-address", 'i'),
        ];
        let (letters, operands) = match self.tool_options("hostname", args, "sfdiA", &long) {
            Ok(o) => o,
            Err(s) => return s,
        };
        if !operands.is_empty() {
            self.err_raw("hostname: you must be root to change the host name\n");
            return 1;
        }
        let host = self.host_name();
        let text = match letters.last() {
            Some('d') => String::new(),
            Some('i') => "127.0.1.1".to_string(),
            Some('s') => host.split('.').next().unwrap_or(&host).to_string(),
            _ => host,
        };
        self.out_str(&format!("{text}\n"))
    }

    pub(super) fn b_uname(&mut self, args: &[String]) -> i32 {
        let long = [
            ("all", 'a'),
            ("kernel-name", 's'),
            ("nodename", 'n'),
            ("kernel-release", 'r'),
            ("kernel-version", 'v'),
            ("machine", 'm'),
            ("processor", 'p'),
            ("hardware-platform", 'i'),
            ("operating-system", 'o'),
        ];
        let (letters, operands) = match self.tool_options("uname", args, "asnrvmpio", &long) {
            Ok(o) => o,
            Err(s) => return s,
        };
        if let Some(extra) = operands.first() {
            return self.tool_usage_error("uname", &format!("extra operand '{extra}'"));
        }
        let all = letters.contains(&'a');
        let host = self.host_name();
        // GNU's order, whatever the order of the flags; -a leaves out the unknown ones.
        let fields: [(char, &str, bool); 8] = [
            ('s', KERNEL, true),
            ('n', &host, true),
            ('r', RELEASE, true),
            ('v', VERSION, true),
            ('m', MACHINE, true),
            ('p', "unknown", false),
            ('i', "unknown", false),
            ('o', "GNU/Linux", true),
        ];
        let picked: Vec<&str> = if letters.is_empty() {
            vec![KERNEL]
        } else {
            fields
                .iter()
                .filter(|(c, _, known)| letters.contains(c) || (all && *known))
                .map(|(_, v, _)| *v)
                .collect()
        };
        self.out_str(&format!("{}\n", picked.join(" ")))
    }
}

const TTY_HELP: &str = "Usage: tty [OPTION]...
Print the file name of the terminal connected to standard input.

  -s, --silent, --quiet   print nothing, only return an exit status
      --help        display this help and exit
      --version     output version information and exit

GNU coreutils online help: <https://www.gnu.org/software/coreutils/>
Full documentation <https://www.gnu.org/software/coreutils/tty>
or available locally via: info '(coreutils) tty invocation'
";

/// `--version` of a GNU coreutils program the shell stands in for (Debian 12's 9.1).
pub(super) fn coreutils_version(tool: &str, authors: &str) -> String {
    format!(
        "{tool} (GNU coreutils) 9.1
Copyright (C) 2022 Free Software Foundation, Inc.
License GPLv3+: GNU GPL version 3 or later <https://gnu.org/licenses/gpl.html>.
This is free software: you are free to change and redistribute it.
There is NO WARRANTY, to the extent permitted by law.

Written by {authors}.
"
    )
}
