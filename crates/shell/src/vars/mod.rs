//! Shell variables: scalars, indexed and associative arrays, attributes, and bash's dynamic
//! scoping of `local`.
//!
//! Locals use shallow binding: the visible value always sits in one map, and each function
//! frame remembers what it shadowed, restoring it on return. Lookups stay one map probe, and
//! a fork clones the whole table in O(1) (persistent maps).

pub(crate) mod print;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock};

// The attribute bits of [`Var::attrs`], one per `declare` flag.
/// `export`/`declare -x`: passed to programs in their environment (when it has a string
/// value).
pub const ATTR_EXPORT: u8 = 1;
/// `readonly`/`declare -r`: assigning or unsetting it fails; cannot be removed again.
pub const ATTR_READONLY: u8 = 2;
/// `declare -i`: every value assigned is evaluated as an arithmetic expression first.
pub const ATTR_INTEGER: u8 = 4;
/// `declare -l`: values are lower-cased when assigned.
pub const ATTR_LOWER: u8 = 8;
/// `declare -u`: values are upper-cased when assigned.
pub const ATTR_UPPER: u8 = 16;
/// `declare -n`: the value is the name of another variable, which every use goes to.
pub const ATTR_NAMEREF: u8 = 32;
/// `declare -t`: only listed by `declare -p`.
pub const ATTR_TRACE: u8 = 64;
/// An array declared (`declare -a x`) but never assigned: `declare -p` shows no `=()`.
pub const ATTR_NOVALUE: u8 = 128;
/// `declare -c`: capitalized. bash never has -l and -u together, so both bits mean this.
pub const ATTR_CAPCASE: u8 = ATTR_LOWER | ATTR_UPPER;

/// What a variable holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// Declared (`local x`, `export x`) but without a value.
    Unset,
    /// A string (what `x=...` makes; integers are strings too).
    Str(String),
    /// An indexed array (`a=(...)`, `declare -a`): sparse, keyed by index.
    Indexed(BTreeMap<i64, String>),
    /// An associative array (`declare -A`).
    Assoc(AssocMap),
}

/// An associative array that lists its keys in the order bash does.
///
/// Scripts see that order (`${!m[@]}`, `declare -p`), and bash's is its hash table's: keys
/// sorted by FNV-1 bucket in a 1024-bucket table, the most recently inserted first within a
/// bucket. Each entry keeps when it was inserted so the order can be recreated on demand.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AssocMap {
    entries: BTreeMap<String, (u64, String)>,
    next_seq: u64,
}

/// Buckets of a bash associative array (`ASSOC_HASH_BUCKETS`).
const ASSOC_BUCKETS: u32 = 1024;

pub(crate) fn bash_hash(s: &str) -> u32 {
    let mut h: u32 = 2_166_136_261;
    for b in s.bytes() {
        h = h.wrapping_mul(16_777_619);
        h ^= u32::from(b);
    }
    h
}

impl AssocMap {
    /// An empty map.
    pub fn new() -> AssocMap {
        AssocMap::default()
    }

    /// The value of key `k`.
    pub fn get(&self, k: &str) -> Option<&String> {
        self.entries.get(k).map(|(_, v)| v)
    }

    /// Whether `k` is set (possibly to an empty string).
    pub fn contains_key(&self, k: &str) -> bool {
        self.entries.contains_key(k)
    }

    /// Sets a key; an existing key keeps its place, as bash updates in place.
    pub fn insert(&mut self, k: String, v: String) {
        self.slot(k).clone_from(&v);
    }

    /// The value of `k`, created empty (and placed as newest) when missing.
    pub fn slot(&mut self, k: String) -> &mut String {
        let seq = self.next_seq;
        let e = self
            .entries
            .entry(k)
            .or_insert_with(|| (seq, String::new()));
        if e.0 == seq {
            self.next_seq += 1;
        }
        &mut e.1
    }

    /// Unsets key `k`, returning its value; inserting it again later places it as newest.
    pub fn remove(&mut self, k: &str) -> Option<String> {
        self.entries.remove(k).map(|(_, v)| v)
    }

    /// The number of keys (`${#m[@]}`).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map has no keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries in bash's order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        let mut v: Vec<(u32, std::cmp::Reverse<u64>, &String, &String)> = self
            .entries
            .iter()
            .map(|(k, (seq, val))| {
                (
                    bash_hash(k) & (ASSOC_BUCKETS - 1),
                    std::cmp::Reverse(*seq),
                    k,
                    val,
                )
            })
            .collect();
        v.sort();
        v.into_iter().map(|(_, _, k, val)| (k, val))
    }

    /// The keys in bash's order (`${!m[@]}`).
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.iter().map(|(k, _)| k)
    }

    /// The values in bash's order (`${m[@]}`).
    pub fn values(&self) -> impl Iterator<Item = &String> {
        self.iter().map(|(_, v)| v)
    }
}

/// One shell variable: its value and its `declare` attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Var {
    /// The value; [`Value::Unset`] for a variable only declared.
    pub value: Value,
    /// A set of `ATTR_*` bits.
    pub attrs: u8,
}

impl Var {
    /// A string variable without attributes, as `name=s` makes it.
    pub fn scalar(s: impl Into<String>) -> Var {
        Var {
            value: Value::Str(s.into()),
            attrs: 0,
        }
    }

    /// Whether the attribute bit `attr` (an `ATTR_*` constant) is set.
    pub fn has(&self, attr: u8) -> bool {
        self.attrs & attr != 0
    }

    /// The value as a scalar: a string, or element 0 of an array (bash's `$arr`).
    pub fn scalar_value(&self) -> Option<&str> {
        match &self.value {
            Value::Unset => None,
            Value::Str(s) => Some(s),
            Value::Indexed(m) => m.get(&0).map(String::as_str),
            Value::Assoc(m) => m.get("0").map(String::as_str),
        }
    }

    /// Whether the value is an indexed or associative array (an empty one too).
    pub fn is_array(&self) -> bool {
        matches!(self.value, Value::Indexed(_) | Value::Assoc(_))
    }
}

#[derive(Debug, Clone, Default)]
struct Frame {
    /// Name → the variable as it was before this frame's `local` (None: it did not exist).
    saved: HashMap<String, Option<Var>>,
}

/// The variables the shell itself rewrites all the time: the call stack's arrays on every
/// function call and return, `PIPESTATUS` after every pipeline.
const BUSY: [&str; 4] = ["BASH_SOURCE", "BASH_LINENO", "FUNCNAME", "PIPESTATUS"];

/// The visible variables: a persistent map, and the busy variables beside it.
///
/// A command substitution runs in a fork that shares the map's nodes with its parent, so its
/// first write copies the path to the written entry, every entry of each node on it
/// included, and dropping the fork frees them again. `$(f x)` writes the call stack's
/// arrays twice (the call and the return) and `PIPESTATUS` once per command, and often
/// nothing else: kept out of the map, they cost a fork no copy at all.
#[derive(Debug, Clone, Default)]
struct Table {
    map: im::HashMap<String, Var>,
    busy: [Option<Arc<Var>>; 4],
}

fn busy_slot(name: &str) -> Option<usize> {
    BUSY.iter().position(|b| *b == name)
}

/// `BUSY` as the map's keys are, for [`Table::iter`].
fn busy_names() -> &'static [String; 4] {
    static NAMES: LazyLock<[String; 4]> = LazyLock::new(|| BUSY.map(String::from));
    &NAMES
}

impl Table {
    fn get(&self, name: &str) -> Option<&Var> {
        match busy_slot(name) {
            Some(i) => self.busy[i].as_deref(),
            None => self.map.get(name),
        }
    }

    fn get_mut(&mut self, name: &str) -> Option<&mut Var> {
        match busy_slot(name) {
            Some(i) => self.busy[i].as_mut().map(Arc::make_mut),
            None => self.map.get_mut(name),
        }
    }

    fn insert(&mut self, name: String, var: Var) {
        match busy_slot(&name) {
            Some(i) => self.busy[i] = Some(Arc::new(var)),
            None => {
                self.map.insert(name, var);
            }
        }
    }

    fn remove(&mut self, name: &str) -> Option<Var> {
        match busy_slot(name) {
            Some(i) => self.busy[i].take().map(Arc::unwrap_or_clone),
            None => self.map.remove(name),
        }
    }

    fn iter(&self) -> impl Iterator<Item = (&String, &Var)> {
        let busy = busy_names()
            .iter()
            .zip(&self.busy)
            .filter_map(|(k, v)| Some((k, v.as_deref()?)));
        self.map.iter().chain(busy)
    }

    fn keys(&self) -> impl Iterator<Item = &String> {
        self.iter().map(|(k, _)| k)
    }
}

/// The variable table of one shell session, with the `local` frames of the functions
/// running. Cloning it is cheap (a persistent map), which is how a subshell or a fork gets
/// its own copy.
#[derive(Debug, Clone, Default)]
pub struct Vars {
    map: Table,
    frames: Vec<Frame>,
}

impl Vars {
    /// The visible variable `name` (the innermost `local` one inside functions). Namerefs
    /// are not followed.
    pub fn get(&self, name: &str) -> Option<&Var> {
        self.map.get(name)
    }

    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut Var> {
        self.map.get_mut(name)
    }

    /// The visible value of `name` as `$name` reads it (element 0 of an array); `None` when
    /// unset or only declared.
    pub fn scalar(&self, name: &str) -> Option<&str> {
        self.map.get(name).and_then(Var::scalar_value)
    }

    /// Sets or replaces a variable wholesale (attributes included).
    pub fn put(&mut self, name: &str, var: Var) {
        self.map.insert(name.to_string(), var);
    }

    /// Removes the visible binding of `name`, ignoring `readonly` (the caller checks it); a
    /// global shadowed by a `local` comes back when the function returns.
    pub fn remove(&mut self, name: &str) -> Option<Var> {
        self.map.remove(name)
    }

    pub(crate) fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.map.keys().cloned().collect();
        v.sort();
        v
    }

    /// Every visible binding, in no particular order (the sandbox reads the exported ones
    /// when it merges a fork's environment).
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Var)> {
        self.map.iter()
    }

    /// Exported variables that have a value, sorted by name, as a program's environment.
    pub fn environ(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = self
            .map
            .iter()
            .filter(|(_, v)| v.has(ATTR_EXPORT))
            .filter_map(|(k, v)| match &v.value {
                Value::Str(s) => Some((k.clone(), s.clone())),
                _ => None,
            })
            .collect();
        env.sort();
        env
    }

    pub(crate) fn in_function(&self) -> bool {
        !self.frames.is_empty()
    }

    pub(crate) fn push_frame(&mut self) {
        self.frames.push(Frame::default());
    }

    pub(crate) fn pop_frame(&mut self) {
        if let Some(frame) = self.frames.pop() {
            for (name, old) in frame.saved {
                match old {
                    Some(v) => {
                        self.map.insert(name, v);
                    }
                    None => {
                        self.map.remove(&name);
                    }
                }
            }
        }
    }

    /// Makes `name` local to the innermost function: remembers the visible variable so the
    /// function's return restores it. The new local starts unset without attributes, except
    /// that bash keeps the value when it was already local to this same frame.
    pub fn make_local(&mut self, name: &str) -> bool {
        let Some(frame) = self.frames.last_mut() else {
            return false;
        };
        if frame.saved.contains_key(name) {
            return true;
        }
        let old = self.map.get(name).cloned();
        frame.saved.insert(name.to_string(), old);
        self.map.insert(
            name.to_string(),
            Var {
                value: Value::Unset,
                attrs: 0,
            },
        );
        true
    }

    /// How many function frames are active.
    pub(crate) fn frame_count(&self) -> usize {
        self.frames.len()
    }

    /// Whether a frame from index `depth` on (a function called since) holds a local `name`.
    pub(crate) fn local_since(&self, name: &str, depth: usize) -> bool {
        self.frames
            .iter()
            .skip(depth)
            .any(|f| f.saved.contains_key(name))
    }

    /// Changes what the innermost frame's local `name` restores when it ends.
    pub(crate) fn set_saved(&mut self, name: &str, old: Option<Var>) {
        if let Some(f) = self.frames.last_mut()
            && let Some(slot) = f.saved.get_mut(name)
        {
            *slot = old;
        }
    }

    /// Whether `name` is local to the innermost function.
    pub fn is_local_here(&self, name: &str) -> bool {
        self.frames
            .last()
            .is_some_and(|f| f.saved.contains_key(name))
    }

    /// `unset` of a variable local to a calling function (bash's dynamic scoping): drops
    /// that binding, so what it shadowed is visible again. False when no frame holds `name`.
    pub fn unset_outer_local(&mut self, name: &str) -> bool {
        let Some(frame) = self
            .frames
            .iter_mut()
            .rev()
            .find(|f| f.saved.contains_key(name))
        else {
            return false;
        };
        match frame.saved.remove(name).flatten() {
            Some(v) => {
                self.map.insert(name.to_string(), v);
            }
            None => {
                self.map.remove(name);
            }
        }
        true
    }

    /// Whether a function frame holds a local `name` hiding the global one.
    pub fn is_shadowed(&self, name: &str) -> bool {
        self.frames.iter().any(|f| f.saved.contains_key(name))
    }

    /// Runs `f` on the global binding of `name` (`declare -g` inside a function): the value
    /// the outermost frame shadowed, or the visible one when no frame shadows it.
    pub fn with_global<R>(&mut self, name: &str, f: impl FnOnce(&mut Option<Var>) -> R) -> R {
        for frame in self.frames.iter_mut() {
            if let Some(slot) = frame.saved.get_mut(name) {
                return f(slot);
            }
        }
        let mut slot = self.map.get(name).cloned();
        let r = f(&mut slot);
        match slot {
            Some(v) => {
                self.map.insert(name.to_string(), v);
            }
            None => {
                self.map.remove(name);
            }
        }
        r
    }
}

pub(crate) fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locals_restore_on_return() {
        let mut v = Vars::default();
        v.put("x", Var::scalar("global"));
        v.push_frame();
        v.make_local("x");
        v.put("x", Var::scalar("local"));
        v.make_local("y");
        assert_eq!(v.scalar("x"), Some("local"));
        v.with_global("x", |g| *g = Some(Var::scalar("changed")));
        v.pop_frame();
        assert_eq!(v.scalar("x"), Some("changed"));
        assert!(v.get("y").is_none());
    }

    #[test]
    fn names() {
        assert!(is_valid_name("_a1"));
        assert!(!is_valid_name("1a"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("a-b"));
    }
}
