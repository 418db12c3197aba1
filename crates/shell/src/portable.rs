//! A session's state as plain data, to carry it to another process (`Sandbox::export_state`).
//!
//! Functions travel as the text `declare -f` prints and are parsed again on the way in: the
//! AST is the parser's business, and the printed form is the one bash itself round-trips.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::StateError;
use crate::interp::{Options, ShellLimits, ShellState};
use crate::syntax::ast::{Command, FunctionDef};
use crate::vars::{AssocMap, Value, Var, Vars};

#[derive(Serialize, Deserialize)]
struct Portable {
    vars: Vec<PortableVar>,
    functions: Vec<String>,
    exported_functions: Vec<String>,
    readonly_functions: Vec<String>,
    aliases: Vec<(String, String)>,
    cwd: String,
    opts: Options,
    status: i32,
    positional: Vec<String>,
    arg0: String,
    traps: Vec<(String, String)>,
    dirstack: Vec<String>,
    umask: u32,
    limits: ShellLimits,
    pid: u32,
    #[serde(default)]
    ulimits: Vec<(char, Option<u64>)>,
    #[serde(default)]
    ulimits_hard: Vec<(char, Option<u64>)>,
    #[serde(default)]
    disabled_builtins: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct PortableVar {
    name: String,
    attrs: u8,
    value: PortableValue,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum PortableValue {
    Unset,
    Str(String),
    Indexed(Vec<(i64, String)>),
    /// In the order the shell lists the keys.
    Assoc(Vec<(String, String)>),
}

impl ShellState {
    /// The session as JSON: variables with their attributes, functions, aliases, cwd,
    /// options, traps, the directory stack, umask, the shell's limits and `$$`.
    pub fn to_portable(&self) -> serde_json::Value {
        let mut vars: Vec<PortableVar> = self
            .vars
            .iter()
            .map(|(name, v)| PortableVar {
                name: name.clone(),
                attrs: v.attrs,
                value: match &v.value {
                    Value::Unset => PortableValue::Unset,
                    Value::Str(s) => PortableValue::Str(s.clone()),
                    Value::Indexed(m) => {
                        PortableValue::Indexed(m.iter().map(|(k, v)| (*k, v.clone())).collect())
                    }
                    Value::Assoc(m) => PortableValue::Assoc(
                        m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                    ),
                },
            })
            .collect();
        vars.sort_by(|a, b| a.name.cmp(&b.name));
        let mut functions: Vec<(&String, String)> = self
            .functions
            .iter()
            .map(|(name, f)| (name, crate::printer::function_text(f)))
            .collect();
        functions.sort();
        let sorted = |s: &im::HashSet<String>| {
            let mut v: Vec<String> = s.iter().cloned().collect();
            v.sort();
            v
        };
        let p = Portable {
            vars,
            functions: functions.into_iter().map(|(_, t)| t).collect(),
            exported_functions: sorted(&self.exported_functions),
            readonly_functions: sorted(&self.readonly_functions),
            aliases: self
                .aliases
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            cwd: self.cwd.clone(),
            opts: self.opts.clone(),
            status: self.status,
            positional: self.positional.clone(),
            arg0: self.arg0.clone(),
            traps: self
                .traps
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            dirstack: self.dirstack.clone(),
            umask: self.umask,
            limits: self.limits.clone(),
            pid: self.pid,
            ulimits: self.ulimits.iter().map(|(k, v)| (*k, *v)).collect(),
            ulimits_hard: self.ulimits_hard.iter().map(|(k, v)| (*k, *v)).collect(),
            disabled_builtins: self.disabled_builtins.iter().cloned().collect(),
        };
        serde_json::to_value(p).expect("plain data serializes")
    }

    /// The session [`Self::to_portable`] described. Fails with a message on anything that is
    /// not such a description, or on a function that does not parse.
    pub fn from_portable(v: serde_json::Value) -> Result<ShellState, StateError> {
        let p: Portable =
            serde_json::from_value(v).map_err(|e| StateError::Malformed(e.to_string()))?;
        let mut vars = Vars::default();
        for pv in p.vars {
            let value = match pv.value {
                PortableValue::Unset => Value::Unset,
                PortableValue::Str(s) => Value::Str(s),
                PortableValue::Indexed(items) => Value::Indexed(items.into_iter().collect()),
                PortableValue::Assoc(items) => {
                    // The listing order is by hash bucket, newest first within a bucket:
                    // inserting from the last listed keeps it.
                    let mut m = AssocMap::new();
                    for (k, v) in items.into_iter().rev() {
                        m.insert(k, v);
                    }
                    Value::Assoc(m)
                }
            };
            vars.put(
                &pv.name,
                Var {
                    value,
                    attrs: pv.attrs,
                },
            );
        }
        let mut functions = im::HashMap::new();
        for text in p.functions {
            let f = parse_function(&text)?;
            functions.insert(f.name.clone(), Arc::new(f));
        }
        Ok(ShellState {
            vars,
            functions,
            exported_functions: p.exported_functions.into_iter().collect(),
            readonly_functions: p.readonly_functions.into_iter().collect(),
            aliases: p.aliases.into_iter().collect(),
            cwd: p.cwd,
            opts: p.opts,
            status: p.status,
            positional: p.positional,
            arg0: p.arg0,
            traps: p.traps.into_iter().collect(),
            untrappable: im::OrdSet::new(),
            dirstack: p.dirstack,
            umask: p.umask & 0o777,
            limits: p.limits,
            pid: p.pid,
            ulimits: p.ulimits.into_iter().collect(),
            ulimits_hard: p.ulimits_hard.into_iter().collect(),
            // A state from a build with other builtins keeps the names this one has.
            disabled_builtins: p
                .disabled_builtins
                .into_iter()
                .filter(|n| crate::builtins::is_builtin(n))
                .collect(),
            hashed: im::HashMap::new(),
            history: im::Vector::new(),
            history_base: 1,
            history_new: 0,
            history_offset: 0,
            command_number: 0,
            history_lines_read: 0,
            history_last_added: false,
            history_pushed: false,
            readline: None,
            completions: im::HashMap::new(),
        })
    }
}

fn parse_function(text: &str) -> Result<FunctionDef, StateError> {
    let bad = || StateError::NotAFunction(text.to_string());
    let script = crate::parse(text).map_err(StateError::FunctionSyntax)?;
    let [item] = script.items.as_slice() else {
        return Err(bad());
    };
    match item.and_or.first.commands.as_slice() {
        [Command::FunctionDef(f)] if item.and_or.rest.is_empty() => Ok(f.clone()),
        _ => Err(bad()),
    }
}
