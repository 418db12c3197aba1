//! The positional parameters: `shift` and `getopts`.

use crate::interp::{Flow, FlowResult, Interp};
use crate::vars::is_valid_name;

impl Interp {
    pub(super) fn b_shift(&mut self, args: &[String]) -> FlowResult {
        // As with `break` and `return`: extra arguments end a `bash -c` shell.
        if args.len() > 1 {
            self.err("shift: too many arguments");
            return Err(Flow::Exit(1));
        }
        let n = match args.first() {
            None => 1,
            Some(a) => match a.trim().parse::<i64>() {
                Ok(n) if n >= 0 => n as usize,
                Ok(_) => {
                    self.err(&format!("shift: {a}: shift count out of range"));
                    return Ok(1);
                }
                Err(_) => {
                    self.err(&format!("shift: {a}: numeric argument required"));
                    return Ok(1);
                }
            },
        };
        if n > self.st.positional.len() {
            return Ok(1);
        }
        self.st.positional.drain(..n);
        Ok(0)
    }

    pub(super) fn b_getopts(&mut self, args: &[String]) -> i32 {
        if args.len() < 2 {
            // Only the usage line, with no "bash: line N:" before it, as bash.
            self.usage("getopts");
            return 2;
        }
        let var = args[1].clone();
        // bash parses the option (moving OPTIND, setting OPTARG) before it finds the name
        // is bad; nothing is assigned to it and the status is 1.
        let status = self.getopts_step(args, &var);
        if !is_valid_name(&var) {
            self.st.vars.remove(&var);
            self.err(&format!("getopts: `{var}': not a valid identifier"));
            return 1;
        }
        status
    }

    fn getopts_step(&mut self, args: &[String], var: &str) -> i32 {
        let var = if is_valid_name(var) { var } else { "" };
        let spec = args[0].clone();
        let params: Vec<String> = if args.len() > 2 {
            args[2..].to_vec()
        } else {
            self.st.positional.clone()
        };
        let silent = spec.starts_with(':');
        let spec = spec.trim_start_matches(':').to_string();
        let optind: usize = self
            .get_var("OPTIND")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1)
            .max(1);
        if optind != self.getopts_optind {
            self.getopts_char = 0;
        }
        let set = |me: &mut Interp, name: &str, v: String| {
            if !name.is_empty() {
                // getopts moving OPTIND on is not the script resetting it.
                let ch = me.getopts_char;
                let _ = me.set_var(name, v);
                me.getopts_char = ch;
            }
        };
        let Some(arg) = params.get(optind - 1).cloned() else {
            // Past the last argument OPTIND points just after it, whatever it was.
            set(self, "OPTIND", (params.len() + 1).to_string());
            self.getopts_optind = params.len() + 1;
            self.st.vars.remove("OPTARG");
            set(self, var, "?".into());
            self.getopts_char = 0;
            return 1;
        };
        if self.getopts_char == 0 {
            if arg == "--" {
                set(self, "OPTIND", (optind + 1).to_string());
                self.getopts_optind = optind + 1;
                self.st.vars.remove("OPTARG");
                set(self, var, "?".into());
                return 1;
            }
            if !arg.starts_with('-') || arg == "-" {
                self.st.vars.remove("OPTARG");
                set(self, var, "?".into());
                return 1;
            }
            self.getopts_char = 1;
        }
        let chars: Vec<char> = arg.chars().collect();
        let c = chars[self.getopts_char];
        self.getopts_char += 1;
        let mut next_optind = optind;
        let at_end = self.getopts_char >= chars.len();
        if at_end {
            next_optind += 1;
            self.getopts_char = 0;
        }
        let pos = spec.find(c).filter(|_| c != ':');
        match pos {
            None => {
                if silent {
                    set(self, "OPTARG", c.to_string());
                } else {
                    self.err_raw(&format!("bash: illegal option -- {c}\n"));
                    self.st.vars.remove("OPTARG");
                }
                set(self, var, "?".into());
            }
            Some(p) => {
                let takes_arg = spec[p + c.len_utf8()..].starts_with(':');
                if takes_arg {
                    if !at_end {
                        let rest: String = chars[self.getopts_char..].iter().collect();
                        set(self, "OPTARG", rest);
                        next_optind += 1;
                        self.getopts_char = 0;
                    } else if let Some(v) = params.get(next_optind - 1).cloned() {
                        set(self, "OPTARG", v);
                        next_optind += 1;
                    } else if silent {
                        set(self, "OPTARG", c.to_string());
                        set(self, var, ":".into());
                        set(self, "OPTIND", next_optind.to_string());
                        self.getopts_optind = next_optind;
                        return 0;
                    } else {
                        self.err_raw(&format!("bash: option requires an argument -- {c}\n"));
                        self.st.vars.remove("OPTARG");
                        set(self, var, "?".into());
                        set(self, "OPTIND", next_optind.to_string());
                        self.getopts_optind = next_optind;
                        return 0;
                    }
                } else {
                    self.st.vars.remove("OPTARG");
                }
                set(self, var, c.to_string());
            }
        }
        set(self, "OPTIND", next_optind.to_string());
        self.getopts_optind = next_optind;
        0
    }
}
