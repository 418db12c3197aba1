//! Associative arrays that remember insertion order, so `for (k in a)` is deterministic.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;

use crate::value::Value;

/// FNV-1a: array keys are short strings, where it beats SipHash, and nothing here needs
/// protection from adversarial collisions.
#[derive(Default)]
pub struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf29ce484222325
        } else {
            self.0
        };
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        self.0 = h;
    }
}

type FnvMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

#[derive(Default, Debug)]
pub struct Array {
    map: FnvMap<Rc<str>, usize>,
    entries: Vec<Option<(Rc<str>, Value)>>,
}

impl std::fmt::Debug for Fnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Fnv")
    }
}

impl Array {
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn get(&self, k: &str) -> Option<&Value> {
        let &i = self.map.get(k)?;
        self.entries[i].as_ref().map(|e| &e.1)
    }

    pub fn contains(&self, k: &str) -> bool {
        self.map.contains_key(k)
    }

    /// The element, created uninitialized if absent (referencing an element creates it).
    pub fn get_or_create(&mut self, k: &str) -> &mut Value {
        let i = match self.map.get(k) {
            Some(&i) => i,
            None => {
                let key: Rc<str> = Rc::from(k);
                let i = self.entries.len();
                self.entries.push(Some((key.clone(), Value::Uninit)));
                self.map.insert(key, i);
                i
            }
        };
        match &mut self.entries[i] {
            Some(e) => &mut e.1,
            None => unreachable!("index points at a live entry"),
        }
    }

    pub fn set(&mut self, k: &str, v: Value) {
        *self.get_or_create(k) = v;
    }

    pub fn remove(&mut self, k: &str) {
        if let Some(i) = self.map.remove(k) {
            self.entries[i] = None;
            if self.entries.len() > 32 && self.map.len() * 2 < self.entries.len() {
                self.compact();
            }
        }
    }

    fn compact(&mut self) {
        self.entries.retain(|e| e.is_some());
        for (i, e) in self.entries.iter().enumerate() {
            if let Some((k, _)) = e
                && let Some(slot) = self.map.get_mut(k)
            {
                *slot = i;
            }
        }
    }

    pub fn clear(&mut self) {
        self.map.clear();
        self.entries.clear();
    }

    pub fn keys(&self) -> Vec<Rc<str>> {
        self.entries
            .iter()
            .filter_map(|e| e.as_ref().map(|e| e.0.clone()))
            .collect()
    }

    pub fn pairs(&self) -> Vec<(Rc<str>, Value)> {
        self.entries.iter().filter_map(|e| e.clone()).collect()
    }
}
