//! Variables: `declare`/`typeset`/`local`/`export`/`readonly` (one implementation), `unset`,
//! `let`, and `declare -p` (the lines themselves are `crate::vars::print`'s).

use std::collections::BTreeMap;

use crate::error::ShellError;
use crate::execute::DeclArg;
use crate::expand::AErr;
use crate::expand::AssignedValue;
use crate::interp::{FlowResult, Interp};
use crate::vars::{
    ATTR_EXPORT, ATTR_INTEGER, ATTR_LOWER, ATTR_NAMEREF, ATTR_READONLY, ATTR_TRACE, ATTR_UPPER,
    Value, Var, is_valid_name,
};

use crate::vars::print::{declare_line, set_line};

/// What a declaration builtin's options ask for.
#[derive(Default, Clone)]
struct DeclFlags {
    /// Attributes to give (`-x`, `-r`, ...) and to take away (`+x`, ...).
    add: u8,
    remove: u8,
    /// `-a`, `-A`: declare an indexed or associative array.
    array: bool,
    assoc: bool,
    /// `+a`, `+A`: an array cannot be turned back into a scalar.
    unarray: bool,
    /// `-p`: print the declarations.
    print: bool,
    /// `-c`: capitalize.
    capcase: bool,
    /// `-g`: in a function, the global binding.
    global: bool,
    /// `-f`, `-F`: functions (with bodies, or names only).
    funcs: bool,
    func_names: bool,
}

impl Interp {
    pub(super) fn b_unset(&mut self, args: &[String]) -> i32 {
        let (flags, operands) = match self.short_options("unset", args, "fvn") {
            Ok(split) => split,
            Err(status) => return status,
        };
        let funcs = flags.contains(&'f');
        let vars_only = flags.contains(&'v');
        let nameref = flags.contains(&'n');
        let mut status = 0;
        for a in operands {
            if funcs && vars_only {
                self.err("unset: cannot simultaneously unset a function and a variable");
                return 1;
            }
            if funcs && !vars_only {
                self.st.functions.remove(a);
                continue;
            }
            let (name, key) = match a.find('[') {
                Some(i) if a.ends_with(']') => {
                    (a[..i].to_string(), Some(a[i + 1..a.len() - 1].to_string()))
                }
                _ => (a.clone(), None),
            };
            if !is_valid_name(&name) {
                // Without -v an invalid variable name may still be a function's: no error.
                if vars_only {
                    self.err(&format!("unset: `{a}': not a valid identifier"));
                    status = 1;
                } else {
                    self.st.functions.remove(a);
                }
                continue;
            }
            let (name, key) = if nameref && key.is_none() {
                // `unset -n` leaves a variable that is no reference alone (bash 5.2).
                if self
                    .st
                    .vars
                    .get(&name)
                    .is_some_and(|v| !v.has(ATTR_NAMEREF))
                {
                    continue;
                }
                (name, None)
            } else {
                let (target, sub) = self.resolve_ref(&name);
                (target, key.or(sub))
            };
            if let Some(key) = key {
                if let Some(v) = self.st.vars.get(&name)
                    && v.has(ATTR_READONLY)
                {
                    self.err(&format!("unset: {name}: cannot unset: readonly variable"));
                    status = 1;
                    continue;
                }
                let is_assoc = matches!(
                    self.st.vars.get(&name).map(|v| &v.value),
                    Some(Value::Assoc(_))
                );
                if !is_assoc && (key == "@" || key == "*") {
                    let _ = self.unset_var(&name);
                    continue;
                }
                let k = self.runtime_key_for(&name, &key);
                let mut before_start = false;
                if let Some(var) = self.st.vars.get_mut(&name) {
                    match (&mut var.value, k) {
                        (Value::Indexed(m), Ok(crate::interp::AssignKey::Index(i))) => {
                            let i = if i < 0 {
                                m.keys().next_back().map(|k| k + 1 + i).unwrap_or(i)
                            } else {
                                i
                            };
                            // A negative index counting back past the first element.
                            before_start = i < 0;
                            m.remove(&i);
                        }
                        (Value::Assoc(m), Ok(crate::interp::AssignKey::Key(k))) => {
                            m.remove(&k);
                        }
                        (Value::Str(_), Ok(crate::interp::AssignKey::Index(0 | -1))) => {
                            var.value = Value::Unset;
                        }
                        (_, Err(m)) => {
                            self.err(&format!("unset: {m}"));
                            status = 1;
                        }
                        _ => {}
                    }
                }
                if before_start {
                    self.err(&format!("unset: [{key}]: bad array subscript"));
                    status = 1;
                }
                continue;
            }
            if self.st.vars.get(&name).is_some() {
                if let Err(m) = self.unset_var(&name) {
                    self.err(&m.to_string());
                    status = 1;
                }
            } else if !vars_only && !nameref {
                self.st.functions.remove(&name);
            }
        }
        status
    }

    pub(crate) fn run_declaration(&mut self, name: &str, args: Vec<DeclArg>) -> FlowResult {
        let (f, items) = match self.declaration_options(name, args) {
            Ok(read) => read,
            Err(status) => return Ok(status),
        };
        if name == "local" && !self.st.vars.in_function() {
            self.err("local: can only be used in a function");
            return Ok(1);
        }
        if (f.funcs || f.func_names)
            && (name == "export" || name == "readonly")
            && !items.is_empty()
        {
            return Ok(self.declare_function_attrs(name, &f, &items));
        }
        if f.funcs || f.func_names {
            return Ok(self.print_functions(&items, f.func_names, f.print));
        }
        if items.is_empty() {
            return Ok(self.list_declarations(name, f.add, f.array, f.assoc, f.print));
        }
        // `export -p NAME` and `readonly -p NAME` print nothing in bash: with names, -p is
        // ignored and the attribute is given.
        if f.print && name != "export" && name != "readonly" {
            return Ok(self.print_declarations(name, &items));
        }
        let make_local = (name == "local" || (self.st.vars.in_function() && !f.global))
            && name != "export"
            && name != "readonly";
        let mut status = 0;
        for item in items {
            let var_name = match &item {
                DeclArg::Plain(s) => s.split(['=', '[', '+']).next().unwrap_or("").to_string(),
                DeclArg::Assign(a, _) => a.name.clone(),
            };
            if !self.declare_item(name, &f, make_local, item)? {
                status = 1;
            } else if f.array && f.assoc {
                // bash makes the associative array `-aA` asks for, then refuses the -a.
                self.err(&format!(
                    "{name}: {var_name}: cannot convert associative to indexed array"
                ));
                status = 1;
            }
        }
        Ok(status)
    }

    /// Reads a declaration builtin's options (`-x`, `+r`, `-a`, `--`, ...) off its arguments:
    /// the attributes to give and take away and what to do, then the names and assignments.
    /// A usage error has been reported when it gives `Err(status)`.
    fn declaration_options(
        &mut self,
        name: &str,
        args: Vec<DeclArg>,
    ) -> Result<(DeclFlags, Vec<DeclArg>), i32> {
        let mut f = DeclFlags::default();
        let mut items: Vec<DeclArg> = Vec::new();
        let mut options_done = false;
        match name {
            "export" => f.add |= ATTR_EXPORT,
            "readonly" => f.add |= ATTR_READONLY,
            _ => {}
        }
        for a in args {
            if let DeclArg::Plain(s) = &a
                && !options_done
                && (s.starts_with('-') || s.starts_with('+'))
                && s.len() > 1
            {
                if s == "--" {
                    options_done = true;
                    continue;
                }
                let on = s.starts_with('-');
                for c in s[1..].chars() {
                    // export takes -f -n -p, readonly -a -A -f -p; the rest are declare's.
                    let foreign = match name {
                        "export" => !matches!(c, 'f' | 'n' | 'p'),
                        "readonly" => !matches!(c, 'a' | 'A' | 'f' | 'p'),
                        _ => false,
                    };
                    if foreign {
                        self.err(&format!("{name}: -{c}: invalid option"));
                        self.err_raw(&format!("{name}: usage: {}\n", decl_usage(name)));
                        return Err(2);
                    }
                    let bit = match c {
                        'x' => ATTR_EXPORT,
                        'r' => ATTR_READONLY,
                        'i' => ATTR_INTEGER,
                        'l' => ATTR_LOWER,
                        'u' => ATTR_UPPER,
                        'c' if name != "export" && name != "readonly" => {
                            f.capcase = on;
                            0
                        }
                        't' => ATTR_TRACE,
                        // `+a`/`+A` cannot take the attribute away; they declare no array.
                        'a' => {
                            f.array |= on;
                            f.unarray |= !on;
                            0
                        }
                        'A' => {
                            f.assoc |= on;
                            f.unarray |= !on;
                            0
                        }
                        'p' => {
                            f.print = true;
                            0
                        }
                        'g' if name != "local" && name != "export" && name != "readonly" => {
                            f.global = true;
                            0
                        }
                        'f' => {
                            f.funcs = true;
                            0
                        }
                        'F' if name != "export" && name != "readonly" => {
                            f.func_names = true;
                            0
                        }
                        'n' if name == "export" => {
                            f.remove |= ATTR_EXPORT;
                            f.add &= !ATTR_EXPORT;
                            0
                        }
                        'n' => ATTR_NAMEREF,
                        _ => {
                            self.err(&format!("{name}: -{c}: invalid option"));
                            self.err_raw(&format!("{name}: usage: {}\n", decl_usage(name)));
                            return Err(2);
                        }
                    };
                    if on {
                        f.add |= bit;
                    } else {
                        f.remove |= bit;
                        f.add &= !bit;
                    }
                }
                continue;
            }
            items.push(a);
        }
        // -l with -u cancel out, as in bash; -c is both bits (see ATTR_CAPCASE).
        if f.add & crate::vars::ATTR_CAPCASE == crate::vars::ATTR_CAPCASE {
            f.add &= !crate::vars::ATTR_CAPCASE;
        }
        if f.capcase {
            f.add |= crate::vars::ATTR_CAPCASE;
        }
        Ok((f, items))
    }

    /// `export -f NAME...` / `readonly -f NAME...`: the attribute on functions.
    fn declare_function_attrs(&mut self, name: &str, f: &DeclFlags, items: &[DeclArg]) -> i32 {
        let mut status = 0;
        for a in items {
            let n = match a {
                DeclArg::Plain(s) => s.clone(),
                DeclArg::Assign(a, _) => a.name.clone(),
            };
            if !self.st.functions.contains_key(&n) {
                self.err(&format!("{name}: {n}: not a function"));
                status = 1;
            } else if name == "export" {
                if f.remove & ATTR_EXPORT != 0 {
                    self.st.exported_functions.remove(&n);
                } else {
                    self.st.exported_functions.insert(n);
                }
            } else {
                self.st.readonly_functions.insert(n);
            }
        }
        status
    }

    /// One name or assignment of a declaration; false when it was refused (and reported).
    fn declare_item(
        &mut self,
        name: &str,
        f: &DeclFlags,
        make_local: bool,
        item: DeclArg,
    ) -> FlowResult<bool> {
        if name == "local"
            && let DeclArg::Plain(s) = &item
            && s == "-"
        {
            // `local -`: the function's option changes end with it.
            if let Some(slot) = self.saved_opts.last_mut()
                && slot.is_none()
            {
                *slot = Some(self.st.opts.clone());
            }
            return Ok(true);
        }
        let mut f = f.clone();
        let (var_name, shown, value) = match item {
            DeclArg::Plain(s) => match self.plain_declaration(&s, &f, make_local)? {
                PlainDecl::Name(n) => (n, s, None),
                // `declare 'a[5]'` declares an array.
                PlainDecl::ArrayName(n) => {
                    f.array |= !f.assoc;
                    (n, s, None)
                }
                PlainDecl::Assign(a, v) => (a.name.clone(), s, Some((a, v))),
                PlainDecl::Invalid => {
                    self.err(&format!("{name}: `{s}': not a valid identifier"));
                    return Ok(false);
                }
            },
            DeclArg::Assign(a, v) => {
                let v = self.reread_declared_value(&a, v, &f, make_local)?;
                (a.name.clone(), a.name.clone(), Some((a, v)))
            }
        };
        let f = &f;
        // `export`/`readonly` take names, never array elements.
        if matches!(name, "export" | "readonly")
            && let Some((_, AssignedValue::Elem(k, _))) = &value
        {
            self.err(&format!(
                "{name}: `{var_name}[{k}]': not a valid identifier"
            ));
            return Ok(false);
        }
        if !is_valid_name(&var_name) {
            self.err(&format!("{name}: `{shown}': not a valid identifier"));
            return Ok(false);
        }
        // Attributes given to a nameref's name without -n/+n go to the variable it names (the
        // array, for `arr[2]`), as bash follows the reference; a local of the name in a
        // function that does not own the nameref is a variable of its own.
        let var_name = if (f.add | f.remove) & ATTR_NAMEREF == 0
            && (!make_local || self.is_local_here(&var_name))
            && self
                .st
                .vars
                .get(&var_name)
                .is_some_and(|v| v.has(ATTR_NAMEREF))
            && !self.ref_is_circular(&var_name)
        {
            let (target, sub) = self.resolve_ref(&var_name);
            // `export` and `readonly` of a reference to an element change nothing.
            if sub.is_some() && matches!(name, "export" | "readonly") {
                return Ok(true);
            }
            if is_valid_name(&target) {
                target
            } else {
                var_name
            }
        } else {
            var_name
        };
        if let Some(v) = self.st.vars.get(&var_name)
            && v.has(ATTR_READONLY)
            && (value.is_some() || f.remove & ATTR_READONLY != 0)
        {
            self.err(&format!("{name}: {var_name}: readonly variable"));
            return Ok(false);
        }
        if f.unarray
            && self
                .st
                .vars
                .get(&var_name)
                .is_some_and(|v| matches!(v.value, Value::Indexed(_) | Value::Assoc(_)))
        {
            self.err(&format!(
                "{name}: {var_name}: cannot destroy array variables in this way"
            ));
            return Ok(false);
        }
        // bash refuses a reference that is an integer without a word, and makes an array
        // of one asked for as a reference array.
        if f.add & ATTR_NAMEREF != 0 && f.add & ATTR_INTEGER != 0 {
            return Ok(false);
        }
        if f.add & ATTR_NAMEREF != 0 && !(f.array || f.assoc) {
            if let Err(m) = self.declare_nameref(&var_name, f.add, make_local, value) {
                self.err(&format!("{name}: {m}"));
                return Ok(false);
            }
            return Ok(true);
        }
        if let Some(existing) = self.st.vars.get(&var_name).map(|v| &v.value) {
            let stays_visible = !make_local || self.is_local_here(&var_name);
            if stays_visible && f.assoc && matches!(existing, Value::Indexed(_)) {
                self.err(&format!(
                    "{name}: {var_name}: cannot convert indexed to associative array"
                ));
                return Ok(false);
            }
            if stays_visible && f.array && !f.assoc && matches!(existing, Value::Assoc(_)) {
                self.err(&format!(
                    "{name}: {var_name}: cannot convert associative to indexed array"
                ));
                return Ok(false);
            }
        }
        if make_local {
            self.make_local_var(&var_name, value.is_some());
        } else if f.global && self.st.vars.in_function() {
            // `declare -g` inside a function writes the global binding.
            let r = self.declare_global(&var_name, f.add, f.remove, f.array, f.assoc, value);
            if let Err(m) = r {
                self.err(&m.to_string());
                return Ok(false);
            }
            return Ok(true);
        }
        let mut var = self.st.vars.get(&var_name).cloned().unwrap_or(Var {
            value: Value::Unset,
            attrs: 0,
        });
        let was_unset = matches!(var.value, Value::Unset);
        // bash's `readonly -a NAME` of a new name without a value makes it readonly only
        // (`declare -r NAME`), where `declare -ra NAME` makes an empty array.
        let shapes = !(name == "readonly" && was_unset && value.is_none());
        if shapes {
            reshape(&mut var.value, f.array, f.assoc);
        }
        var.attrs = (var.attrs | f.add) & !f.remove;
        if f.array || f.assoc {
            var.attrs &= !ATTR_NAMEREF;
        }
        if was_unset && value.is_none() && var.is_array() {
            var.attrs |= crate::vars::ATTR_NOVALUE;
        }
        // The last case attribute asked for wins; -c is both bits.
        match f.add & crate::vars::ATTR_CAPCASE {
            crate::vars::ATTR_CAPCASE => var.attrs |= crate::vars::ATTR_CAPCASE,
            ATTR_UPPER => var.attrs &= !ATTR_LOWER,
            ATTR_LOWER => var.attrs &= !ATTR_UPPER,
            _ => {}
        }
        let readonly_after = var.attrs & ATTR_READONLY != 0;
        let mut ok = true;
        var.attrs &= !ATTR_READONLY;
        self.st.vars.put(&var_name, var);
        if let Some((a, v)) = value {
            let r = match v {
                AssignedValue::Array(items) => self.assign_array(&a.name, items, a.append),
                other => self.store_assignment(&a, other),
            };
            if let Err(m) = r {
                self.err(&format!("{name}: {m}"));
                ok = false;
            }
        }
        if readonly_after && let Some(v) = self.st.vars.get_mut(&var_name) {
            v.attrs |= ATTR_READONLY;
        }
        Ok(ok)
    }

    /// Whether a declaration's `name=(...)` is an array literal: only for an array, the
    /// variable the declaration assigns (a new local is none yet; `-g` means the global).
    fn declares_array(&mut self, name: &str, f: &DeclFlags, make_local: bool) -> bool {
        if f.array || f.assoc {
            return true;
        }
        if f.global && self.st.vars.in_function() {
            return self
                .st
                .vars
                .with_global(name, |g| g.as_ref().is_some_and(Var::is_array));
        }
        if make_local && !self.is_local_here(name) {
            return false;
        }
        self.st.vars.get(name).is_some_and(Var::is_array)
    }

    /// Whether the variable a declaration assigns is (or becomes) an associative array.
    fn declares_assoc(&self, name: &str, f: &DeclFlags) -> bool {
        f.assoc
            || self
                .st
                .vars
                .get(name)
                .is_some_and(|v| matches!(v.value, Value::Assoc(_)))
    }

    /// An assignment word of a declaration, as bash's declaration builtins read it again: a
    /// quoted `(...)` value of an array is an array literal (`declare -a a='(x y)'`), and an
    /// associative array's subscript is expanded a second time (`declare m[$k]=v`).
    fn reread_declared_value(
        &mut self,
        a: &crate::syntax::ast::Assignment,
        v: AssignedValue,
        f: &DeclFlags,
        make_local: bool,
    ) -> FlowResult<AssignedValue> {
        match v {
            AssignedValue::Scalar(s)
                if s.starts_with('(')
                    && s.ends_with(')')
                    && self.declares_array(&a.name, f, make_local) =>
            {
                Ok(match self.array_literal(&a.name, &s)? {
                    Some((_, v)) => v,
                    None => AssignedValue::Scalar(s),
                })
            }
            AssignedValue::Elem(k, s) if self.declares_assoc(&a.name, f) => {
                let k = self.expand_dq_text(&k)?;
                Ok(AssignedValue::Elem(k, s))
            }
            other => Ok(other),
        }
    }

    /// `name=(...)` parsed and expanded as an array assignment, if it is one.
    fn array_literal(
        &mut self,
        name: &str,
        val: &str,
    ) -> FlowResult<Option<(crate::syntax::ast::Assignment, AssignedValue)>> {
        if let Ok(script) = crate::parse(&format!("{name}={val}"))
            && let Some(crate::syntax::ast::ListItem {
                and_or:
                    crate::syntax::ast::AndOr {
                        first: crate::syntax::ast::Pipeline { commands, .. },
                        ..
                    },
                ..
            }) = script.items.first()
            && let Some(crate::syntax::ast::Command::Simple(sc)) = commands.first()
            && let Some(parsed) = sc.assignments.first()
            && matches!(parsed.value, crate::syntax::ast::AssignValue::Array(_))
        {
            let a = parsed.clone();
            let v = self.eval_assignment(&a)?;
            return Ok(Some((a, v)));
        }
        Ok(None)
    }

    /// A declaration argument that came from an expansion or quotes (`export "$n=$v"`,
    /// `declare 'a=(x y)'`, `builtin declare a=1`): bash splits it at its first `=` as it
    /// would an assignment word. A `(...)` value is an array literal only for arrays (bash
    /// 5.2), for the whole array even after a subscript; an associative array's subscript is
    /// expanded.
    fn plain_declaration(
        &mut self,
        s: &str,
        f: &DeclFlags,
        make_local: bool,
    ) -> FlowResult<PlainDecl> {
        let Some(eq) = s.find('=') else {
            if let Some(i) = s.find('[')
                && s.ends_with(']')
                && i + 1 < s.len() - 1
                && is_valid_name(&s[..i])
            {
                return Ok(PlainDecl::ArrayName(s[..i].to_string()));
            }
            return Ok(PlainDecl::Name(s.to_string()));
        };
        let (lhs, val) = (&s[..eq], &s[eq + 1..]);
        let (lhs, append) = match lhs.strip_suffix('+') {
            Some(l) => (l, true),
            None => (lhs, false),
        };
        let (name, index) = match lhs.find('[') {
            Some(i) if lhs.ends_with(']') && i + 1 < lhs.len() => {
                (&lhs[..i], Some(lhs[i + 1..lhs.len() - 1].to_string()))
            }
            _ => (lhs, None),
        };
        if !is_valid_name(name) {
            return Ok(PlainDecl::Invalid);
        }
        let a = crate::syntax::ast::Assignment {
            name: name.to_string(),
            index: None,
            append,
            value: crate::syntax::ast::AssignValue::Scalar(crate::syntax::ast::Word::default()),
        };
        if val.starts_with('(')
            && val.ends_with(')')
            && self.declares_array(name, f, make_local)
            && let Some((mut parsed, v)) = self.array_literal(name, val)?
        {
            parsed.append = append;
            return Ok(PlainDecl::Assign(parsed, v));
        }
        let v = match index {
            Some(k) if self.declares_assoc(name, f) => {
                AssignedValue::Elem(self.expand_dq_text(&k)?, val.to_string())
            }
            Some(k) => AssignedValue::Elem(k, val.to_string()),
            None => AssignedValue::Scalar(val.to_string()),
        };
        Ok(PlainDecl::Assign(a, v))
    }

    /// `declare -n name[=target]`: the value is stored as is, never followed.
    fn declare_nameref(
        &mut self,
        name: &str,
        add: u8,
        make_local: bool,
        value: Option<(crate::syntax::ast::Assignment, AssignedValue)>,
    ) -> Result<(), ShellError> {
        let target = match value {
            Some((_, AssignedValue::Scalar(t))) => Some(t),
            Some(_) => {
                return Err(ShellError::Usage(format!(
                    "{name}: reference variable cannot be an array"
                )));
            }
            None => None,
        };
        // `declare -n ref` on a set variable makes its value the target: checked the same.
        let existing = match self.st.vars.get(name).map(|v| &v.value) {
            Some(Value::Str(t)) if target.is_none() => Some(t.clone()),
            _ => None,
        };
        if let Some(t) = target.as_ref().or(existing.as_ref()) {
            let base = t.split('[').next().unwrap_or("");
            let sub_ok = match t.find('[') {
                Some(i) => t.ends_with(']') && i + 1 < t.len() - 1,
                None => true,
            };
            if !(t.is_empty() || is_valid_name(base) && sub_ok) {
                return Err(ShellError::Usage(format!(
                    "`{t}': invalid variable name for name reference"
                )));
            }
            // Only a target given in the declaration is checked: `x=x; declare -n x` is let
            // through, as in bash.
            if t == name && target.is_some() {
                return Err(ShellError::Usage(format!(
                    "{name}: nameref variable self references not allowed"
                )));
            }
        }
        if make_local {
            self.st.vars.make_local(name);
        }
        let mut var = self.st.vars.get(name).cloned().unwrap_or(Var {
            value: Value::Unset,
            attrs: 0,
        });
        var.attrs |= add;
        if let Some(t) = target {
            var.value = Value::Str(t);
        }
        self.st.vars.put(name, var);
        Ok(())
    }

    fn print_functions(&mut self, items: &[DeclArg], names_only: bool, print: bool) -> i32 {
        let mut names: Vec<String> = if items.is_empty() {
            let mut v: Vec<String> = self.st.functions.keys().cloned().collect();
            v.sort();
            v
        } else {
            items
                .iter()
                .map(|a| match a {
                    DeclArg::Plain(s) => s.clone(),
                    DeclArg::Assign(a, _) => a.name.clone(),
                })
                .collect()
        };
        let mut status = 0;
        let mut text = String::new();
        for n in names.drain(..) {
            match self.st.functions.get(&n).cloned() {
                Some(_) if names_only && items.is_empty() => {
                    text.push_str(&format!("declare -f {n}\n"));
                }
                // `extdebug` adds where the function was defined.
                Some(f) if names_only && self.st.opts.extdebug => {
                    let file = f.source.as_deref().unwrap_or("environment");
                    text.push_str(&format!("{n} {} {file}\n", f.line));
                }
                Some(_) if names_only && print => {
                    text.push_str(&format!("declare -f {n}\n"));
                }
                Some(_) if names_only => text.push_str(&format!("{n}\n")),
                Some(f) => {
                    text.push_str(&crate::printer::function_text(&f));
                    text.push('\n');
                }
                None => status = 1,
            }
        }
        let s = self.out_str(&text);
        if s != 0 { s } else { status }
    }

    fn declare_global(
        &mut self,
        name: &str,
        add: u8,
        remove: u8,
        array: bool,
        assoc: bool,
        value: Option<(crate::syntax::ast::Assignment, AssignedValue)>,
    ) -> Result<(), ShellError> {
        if !self.st.vars.is_shadowed(name) {
            let mut var = self.st.vars.get(name).cloned().unwrap_or(Var {
                value: Value::Unset,
                attrs: 0,
            });
            reshape(&mut var.value, array, assoc);
            var.attrs = (var.attrs | add) & !remove;
            self.st.vars.put(name, var);
            return match value {
                Some((a, AssignedValue::Array(items))) => {
                    self.assign_array(&a.name, items, a.append)
                }
                Some((a, v)) => self.store_assignment(&a, v),
                None => Ok(()),
            };
        }
        // A local hides the global: assign in the visible slot, then move the result into
        // the global binding and put the local back.
        let visible = self.st.vars.get(name).cloned();
        let global = self.st.vars.with_global(name, |g| g.clone());
        let mut var = global.unwrap_or(Var {
            value: if assoc {
                Value::Assoc(crate::vars::AssocMap::new())
            } else if array {
                Value::Indexed(BTreeMap::new())
            } else {
                Value::Unset
            },
            attrs: 0,
        });
        var.attrs = (var.attrs | add) & !remove;
        self.st.vars.put(name, var);
        let r = match value {
            Some((a, AssignedValue::Array(items))) => self.assign_array(&a.name, items, a.append),
            Some((a, v)) => self.store_assignment(&a, v),
            None => Ok(()),
        };
        let result = self.st.vars.get(name).cloned();
        self.st.vars.with_global(name, |g| *g = result);
        match visible {
            Some(v) => self.st.vars.put(name, v),
            None => {
                self.st.vars.remove(name);
            }
        }
        r
    }

    /// `declare -p` / `export` / `readonly -p` without names: every variable with the
    /// requested attributes; plain `declare` lists them as `set` does.
    fn list_declarations(
        &mut self,
        name: &str,
        filter: u8,
        array: bool,
        assoc: bool,
        print: bool,
    ) -> i32 {
        self.sync_option_vars();
        // A bare `local` lists in `declare -p`'s form, unlike a bare `declare`.
        let set_style =
            matches!(name, "declare" | "typeset") && filter == 0 && !array && !assoc && !print;
        let locals_only = name == "local";
        let mut text = String::new();
        let mut names = self.st.vars.names();
        if !locals_only {
            names.extend(
                crate::interp::DYNAMIC_VARS
                    .iter()
                    .filter(|n| self.st.vars.get(n).is_none())
                    .map(|n| n.to_string()),
            );
            names.sort();
        }
        for n in names {
            let dynamic;
            let v = match self.st.vars.get(&n) {
                Some(v) => v,
                None => match self.dynamic_var(&n) {
                    Some(v) => {
                        dynamic = v;
                        &dynamic
                    }
                    None => continue,
                },
            };
            // Several attributes list the variables that have any of them.
            if (filter != 0 && v.attrs & filter == 0)
                || (array && !matches!(v.value, Value::Indexed(_)))
                || (assoc && !matches!(v.value, Value::Assoc(_)))
                || (locals_only && !self.st.vars.is_local_here(&n))
            {
                continue;
            }
            if set_style {
                text.push_str(&set_line(&n, v));
            } else {
                text.push_str(&declare_line(&n, v));
                text.push('\n');
            }
        }
        self.out_str(&text)
    }

    fn print_declarations(&mut self, name: &str, items: &[DeclArg]) -> i32 {
        self.sync_option_vars();
        let mut text = String::new();
        let mut status = 0;
        for a in items {
            // An assignment is no name to show: bash says the whole word is not found.
            let n = a.text();
            self.touch_bash_argv(&n);
            // `local -p NAME` shows only the function's own locals.
            let visible = name != "local" || self.st.vars.is_local_here(&n);
            let var = match self.st.vars.get(&n) {
                None => self.dynamic_var(&n),
                v => v.cloned(),
            };
            let Some(v) = var.filter(|_| visible) else {
                self.err(&format!("{name}: {n}: not found"));
                status = 1;
                continue;
            };
            text.clear();
            text.push_str(&declare_line(&n, &v));
            text.push('\n');
            let s = self.out_str(&text);
            if s != 0 {
                return s;
            }
        }
        status
    }

    pub(super) fn b_let(&mut self, args: &[String]) -> FlowResult {
        if args.is_empty() {
            self.err("let: expression expected");
            return Ok(1);
        }
        let mut last = 0;
        for a in args {
            match self.eval_arith_text(a) {
                Ok(v) => last = v,
                Err(AErr::Msg(m)) => {
                    self.err(&format!("let: {m}"));
                    return Ok(1);
                }
                Err(AErr::Flow(f)) => return Err(f),
            }
        }
        Ok((last == 0) as i32)
    }
}

/// What a declaration argument from an expansion turned out to be.
enum PlainDecl {
    Name(String),
    /// `name[sub]` without a value.
    ArrayName(String),
    Assign(crate::syntax::ast::Assignment, AssignedValue),
    Invalid,
}

fn decl_usage(name: &str) -> &'static str {
    match name {
        "export" => "export [-fn] [name[=value] ...] or export -p",
        "readonly" => "readonly [-aAf] [name[=value] ...] or readonly -p",
        "local" => "local [option] name[=value] ...",
        "typeset" => {
            "typeset [-aAfFgiIlnrtux] name[=value] ... or typeset -p [-aAfFilnrtux] [name ...]"
        }
        _ => "declare [-aAfFgiIlnrtux] name[=value] ... or declare -p [-aAfFilnrtux] [name ...]",
    }
}

/// `declare -a`/`-A` of a variable that is not that kind of array yet: a scalar's value
/// becomes element `0` (key `"0"`), as in bash (`s=w; declare -A s+=([a]=x)` keeps `w`);
/// an indexed array stays one under `-a`.
fn reshape(value: &mut Value, array: bool, assoc: bool) {
    if assoc && !matches!(value, Value::Assoc(_)) {
        let mut map = crate::vars::AssocMap::new();
        if let Value::Str(s) = std::mem::replace(value, Value::Unset) {
            map.insert("0".into(), s);
        }
        *value = Value::Assoc(map);
    } else if array && !matches!(value, Value::Indexed(_) | Value::Assoc(_)) {
        *value = match std::mem::replace(value, Value::Unset) {
            Value::Str(s) => Value::Indexed(BTreeMap::from([(0, s)])),
            _ => Value::Indexed(BTreeMap::new()),
        };
    }
}
