//! `coproc [NAME] command`: a job whose stdin and stdout are pipes to the shell. The shell
//! holds the other ends as descriptors (`${NAME[0]}` reads what the job writes, `${NAME[1]}`
//! writes what it reads) and `NAME_PID` names the job; when the job has ended, the shell
//! forgets both and closes the descriptors, as bash does when it reaps the process.

use wasmsand_exec::{Output, pipe};

use super::table::Coproc;
use crate::interp::{Fd, FlowResult, InSrc, Interp, PIPE_BYTES};
use crate::syntax::ast::Command;
use crate::vars::{Value, Var};

/// bash moves a coprocess's pipe ends to high descriptors: the read end to the highest free
/// one below 64, the write end to the third free one under it (the two between are taken
/// while the pipes are set up).
const HIGH_FD: u32 = 63;

impl Interp {
    pub(crate) fn start_coproc(&mut self, name: &str, body: &Command) -> FlowResult {
        if !crate::vars::is_valid_name(name) {
            self.err(&format!("`{name}': not a valid identifier"));
            return Ok(1);
        }
        self.reap_coprocs();
        let older: Vec<String> = self
            .coprocs
            .iter()
            .map(|c| {
                format!(
                    "warning: execute_coproc: coproc [{}:{}] still exists",
                    c.pid, c.name
                )
            })
            .collect();
        for w in older {
            self.err(&w);
        }
        // bash keeps track of one coprocess: it starts the new one anyway and forgets the
        // older, whose variables and descriptors then stay as they are.
        self.coprocs.clear();
        self.reserve_job()?;
        let token = self.cancel_token();
        let (to_job, job_stdin) = pipe(PIPE_BYTES, &token);
        let (job_stdout, from_job) = pipe(PIPE_BYTES, &token);
        let mut child = self.fork();
        child.fds.set(0, Some(Fd::In(InSrc::Pipe(job_stdin))));
        child.fds.set(1, Some(Fd::Out(Output::from(job_stdout))));
        let text = format!("coproc {name} {} &", crate::printer::command_text(body));
        let body = body.clone();
        let pid = self.start_job_thread(child, text, move |c| c.run_command(&body))?;
        let free = |fds: &crate::interp::Fds, n: &u32| fds.get(*n).is_none();
        let rfd = (3..=HIGH_FD).rev().find(|n| free(&self.fds, n));
        let wfd = rfd.and_then(|r| (3..r).rev().filter(|n| free(&self.fds, n)).nth(2));
        let (Some(rfd), Some(wfd)) = (rfd, wfd) else {
            self.err("coproc: cannot make pipe for coprocess: Too many open files");
            return Ok(1);
        };
        self.fds.set(rfd, Some(Fd::In(InSrc::Pipe(from_job))));
        self.fds.set(wfd, Some(Fd::Out(Output::from(to_job))));
        let ends = [(0, rfd.to_string()), (1, wfd.to_string())];
        self.st.vars.put(
            name,
            Var {
                value: Value::Indexed(ends.into_iter().collect()),
                attrs: 0,
            },
        );
        let _ = self.set_var(&format!("{name}_PID"), pid.to_string());
        self.coprocs.push(Coproc {
            name: name.to_string(),
            pid,
            fds: [rfd, wfd],
        });
        Ok(0)
    }

    /// Forgets the coprocesses whose job has ended: their variables go and their
    /// descriptors close, so what they wrote and nobody read is lost. bash does this when it
    /// reaps children, which it does when it waits for one: after a program, a subshell, a
    /// pipeline or a command substitution, and in `wait`; builtins alone never reap.
    pub(crate) fn reap_coprocs(&mut self) {
        if self.coprocs.is_empty() {
            return;
        }
        let running: Vec<u32> = self
            .jobs
            .iter()
            .filter(|j| j.commands_running())
            .map(|j| j.pid)
            .collect();
        let (alive, ended): (Vec<Coproc>, Vec<Coproc>) = std::mem::take(&mut self.coprocs)
            .into_iter()
            .partition(|c| running.contains(&c.pid));
        self.coprocs = alive;
        for c in ended {
            for fd in c.fds {
                self.fds.set(fd, None);
            }
            self.st.vars.remove(&c.name);
            self.st.vars.remove(&format!("{}_PID", c.name));
        }
    }
}
