//! Evaluation of arithmetic (`$(( ))`, `(( ))`, `let`, subscripts) and of `[[ ]]` / `test`.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use parking_lot::Mutex;

use crate::error::ShellError;
use crate::expand::AErr;
use crate::interp::{AssignKey, Flow, FlowResult, Interp};
use crate::syntax::ast::*;
use crate::vars::Value;

/// The word `"src"` reads as, parsed once per distinct text: arithmetic that holds an
/// expansion is re-read from its text at every evaluation (as bash does), and a loop evaluates
/// the same text each time (parsing `$(( s + $(f $i) ))` anew was an eighth of such a loop).
/// `None` when the text does not read as one word. The parse depends on the text alone.
fn dq_word(src: &str) -> Option<Arc<Word>> {
    /// Distinct texts kept; past it the cache starts over. Longer texts are not kept.
    const KEEP: usize = 1024;
    const LONGEST: usize = 4096;
    static CACHE: OnceLock<Mutex<HashMap<String, Option<Arc<Word>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().get(src) {
        return hit.clone();
    }
    let word = crate::parse(&format!("echo \"{}\"", dq_escape(src)))
        .ok()
        .and_then(|script| {
            let word = script
                .items
                .first()
                .and_then(|i| i.and_or.first.commands.first())
                .and_then(|c| match c {
                    Command::Simple(sc) => sc.words.get(1).cloned(),
                    _ => None,
                });
            match word {
                Some(Arg::Word(w)) => Some(Arc::new(w)),
                _ => None,
            }
        });
    if src.len() > LONGEST {
        return word;
    }
    let mut cache = cache.lock();
    if cache.len() >= KEEP {
        cache.clear();
    }
    cache.insert(src.to_string(), word.clone());
    word
}

/// How deep variable values may refer to further expressions (`a=b; b=c; ...`).
const MAX_ARITH_RECURSION: u32 = 1024;

type AR<T = i64> = Result<T, AErr>;

impl Interp {
    /// Evaluates an arithmetic expression: `Ok(Err(msg))` for an arithmetic error the caller
    /// reports its own way.
    pub(crate) fn arith(&mut self, a: &Arith) -> FlowResult<Result<i64, ShellError>> {
        // bash substitutes `$x` textually before parsing (`a="1+2"; $(($a*3))` is 7): when
        // the expression holds expansions, expand the source text and parse again.
        let res = match &a.expr {
            // `$(( ${base}#ff ))`, `(( x$foo = 1 ))`: only the expanded text is an expression.
            Err(_) if a.source.contains(['$', '`']) => self.arith_textual(a),
            Err(m) => Err(AErr::Msg(m.clone())),
            Ok(e) if contains_expansion(e) => self.arith_textual(a),
            Ok(e) => self.eval_ax(e, 0, &a.source),
        };
        match res {
            Ok(v) => Ok(Ok(v)),
            Err(AErr::Msg(m)) => Ok(Err(ShellError::Arith(m))),
            Err(AErr::Flow(f)) => Err(f),
        }
    }

    fn arith_textual(&mut self, a: &Arith) -> AR {
        let text = self.expand_dq_text(&without_double_quotes(&a.source))?;
        self.eval_arith_text(&text)
    }

    /// Text expanded as if it were inside double quotes (`$x`, `$(...)`, `$((...))`), as
    /// arithmetic and `${x@P}` expand theirs; text that does not parse stays as it is.
    pub(crate) fn expand_dq_text(&mut self, src: &str) -> FlowResult<String> {
        match dq_word(src) {
            Some(w) => self.expand_string(&w),
            None => Ok(src.to_string()),
        }
    }

    /// An arithmetic error inside a word expansion ends the (sub)shell, as in bash.
    pub(crate) fn arith_or_exit(&mut self, a: &Arith) -> FlowResult<i64> {
        match self.arith(a)? {
            Ok(v) => Ok(v),
            Err(m) => {
                self.err(&m.to_string());
                self.arith_fatal = true;
                Err(Flow::Fatal(1))
            }
        }
    }

    /// Evaluates text as an expression (variable values, subscripts, `let`, `declare -i`).
    pub(crate) fn eval_arith_text(&mut self, text: &str) -> AR {
        self.eval_text_depth(text, 0)
    }

    /// For callers that cannot propagate control flow (attribute-driven assignment).
    pub(crate) fn eval_arith_str(&mut self, text: &str) -> Result<i64, ShellError> {
        match self.eval_arith_text(text) {
            Ok(v) => Ok(v),
            Err(AErr::Msg(m)) => Err(ShellError::Arith(m)),
            Err(AErr::Flow(_)) => Err(ShellError::Arith(format!("{text}: expression error"))),
        }
    }

    fn eval_text_depth(&mut self, text: &str, depth: u32) -> AR {
        // Messages name the text from its first non-blank on, trailing blanks kept, as
        // bash's do (`let " 1/0 "`: `1/0 : division by 0`).
        let src = text.trim_start();
        let t = src.trim_end();
        if t.is_empty() {
            return Ok(0);
        }
        // A decimal fast path; `017` is octal and goes through the parser.
        let digits = t.trim_start_matches(['-', '+']);
        if !(digits.len() > 1 && digits.starts_with('0'))
            && let Ok(v) = t.parse::<i64>()
        {
            return Ok(v);
        }
        if depth > MAX_ARITH_RECURSION {
            return Err(AErr::Msg(format!(
                "{t}: expression recursion level exceeded (error token is \"{t}\")"
            )));
        }
        match crate::parse_arith(src) {
            Ok(a) => match &a.expr {
                Ok(e) => {
                    let e = e.clone();
                    self.eval_ax(&e, depth + 1, src)
                }
                // A variable's value that is an element with a malformed subscript
                // (`x='a[1+]'`): the subscript's error, fatal as in bash.
                Err(m) if is_element_text(t) => Err(self.subscript_error(m)),
                Err(m) => Err(AErr::Msg(m.clone())),
            },
            Err(e) => Err(AErr::Msg(format!("{t}: {}", e.message))),
        }
    }

    fn var_num(&mut self, name: &str, depth: u32) -> AR {
        let v = match self.get_var(name) {
            Some(v) => v,
            None => {
                if self.st.opts.nounset {
                    self.err(&format!("{name}: unbound variable"));
                    return Err(AErr::Flow(Flow::Unbound));
                }
                return Ok(0);
            }
        };
        self.eval_text_depth(&v, depth + 1)
    }

    fn elem_num(&mut self, name: &str, idx: &ArithExpr, depth: u32, src: &str) -> AR {
        let name = &self.resolve_ref(name).0;
        // Under `set -u` an element of a variable that does not exist is unbound (a missing
        // element of an existing array still reads as 0, as in bash).
        if self.st.opts.nounset
            && self
                .st
                .vars
                .get(name)
                .is_none_or(|v| matches!(v.value, Value::Unset) || v.has(crate::vars::ATTR_NOVALUE))
        {
            self.err(&format!("{name}: unbound variable"));
            return Err(AErr::Flow(Flow::Unbound));
        }
        let key = self.elem_key(name, idx, depth, src)?;
        let text = match (self.st.vars.get(name).map(|v| &v.value), key) {
            (Some(Value::Indexed(m)), AssignKey::Index(i)) => {
                let i = if i < 0 {
                    m.keys().next_back().map(|k| k + 1 + i).unwrap_or(i)
                } else {
                    i
                };
                m.get(&i).cloned()
            }
            (Some(Value::Assoc(m)), AssignKey::Key(k)) => m.get(&k).cloned(),
            (Some(Value::Str(s)), AssignKey::Index(0)) => Some(s.clone()),
            _ => None,
        };
        match text {
            Some(t) => self.eval_text_depth(&t, depth + 1),
            None => Ok(0),
        }
    }

    fn elem_key(&mut self, name: &str, idx: &ArithExpr, depth: u32, src: &str) -> AR<AssignKey> {
        let name = &self.resolve_ref(name).0;
        let is_assoc = matches!(
            self.st.vars.get(name).map(|v| &v.value),
            Some(Value::Assoc(_))
        );
        if is_assoc {
            let key = match idx {
                ArithExpr::Var(k) => k.clone(),
                ArithExpr::Number(n) => n.to_string(),
                ArithExpr::Expansion(w) => self.expand_string(w)?,
                other => self.eval_ax(other, depth, src)?.to_string(),
            };
            Ok(AssignKey::Key(key))
        } else {
            match self.eval_ax(idx, depth, src) {
                Ok(i) => Ok(AssignKey::Index(i)),
                Err(AErr::Msg(m)) => Err(self.subscript_error(&m)),
                Err(f) => Err(f),
            }
        }
    }

    /// An arithmetic error in an indexed array's subscript: the message, then
    /// [`Interp::line_error`].
    fn subscript_error(&mut self, msg: &str) -> AErr {
        self.err(msg);
        AErr::Flow(self.line_error())
    }

    fn store_lvalue(&mut self, lv: &LValue, v: i64, depth: u32, src: &str) -> AR<()> {
        let r = match lv {
            LValue::Var(name) => self.assign(name, None, v.to_string(), false),
            LValue::Elem(name, idx) => {
                let key = self.elem_key(name, idx, depth, src)?;
                self.assign(name, Some(key), v.to_string(), false)
            }
        };
        r.map_err(|e| AErr::Msg(e.to_string()))
    }

    fn load_lvalue(&mut self, lv: &LValue, depth: u32, src: &str) -> AR {
        match lv {
            LValue::Var(n) => self.var_num(n, depth),
            LValue::Elem(n, i) => self.elem_num(n, i, depth, src),
        }
    }

    pub(crate) fn eval_ax(&mut self, e: &ArithExpr, depth: u32, src: &str) -> AR {
        if depth > MAX_ARITH_RECURSION {
            return Err(AErr::Msg(format!(
                "{src}: expression recursion level exceeded"
            )));
        }
        use ArithBinOp::*;
        Ok(match e {
            ArithExpr::Number(n) => *n,
            ArithExpr::Var(name) => self.var_num(name, depth)?,
            ArithExpr::Elem(name, idx) => self.elem_num(name, idx, depth, src)?,
            ArithExpr::Expansion(w) => {
                let t = self.expand_string(w)?;
                self.eval_text_depth(&t, depth + 1)?
            }
            ArithExpr::Unary(op, x) => {
                let v = self.eval_ax(x, depth + 1, src)?;
                match op {
                    ArithUnaryOp::Neg => v.wrapping_neg(),
                    ArithUnaryOp::Plus => v,
                    ArithUnaryOp::Not => (v == 0) as i64,
                    ArithUnaryOp::BitNot => !v,
                }
            }
            ArithExpr::IncDec {
                target,
                increment,
                prefix,
            } => {
                let old = self.load_lvalue(target, depth, src)?;
                let new = if *increment {
                    old.wrapping_add(1)
                } else {
                    old.wrapping_sub(1)
                };
                self.store_lvalue(target, new, depth, src)?;
                if *prefix { new } else { old }
            }
            ArithExpr::Binary(LogAnd, a, b) => {
                let x = self.eval_ax(a, depth + 1, src)?;
                if x == 0 {
                    0
                } else {
                    (self.eval_ax(b, depth + 1, src)? != 0) as i64
                }
            }
            ArithExpr::Binary(LogOr, a, b) => {
                let x = self.eval_ax(a, depth + 1, src)?;
                if x != 0 {
                    1
                } else {
                    (self.eval_ax(b, depth + 1, src)? != 0) as i64
                }
            }
            ArithExpr::Binary(Comma, a, b) => {
                self.eval_ax(a, depth + 1, src)?;
                self.eval_ax(b, depth + 1, src)?
            }
            ArithExpr::Binary(op, a, b) => {
                let x = self.eval_ax(a, depth + 1, src)?;
                let y = self.eval_ax(b, depth + 1, src)?;
                binop(*op, x, y, src)?
            }
            ArithExpr::Conditional(c, a, b) => {
                if self.eval_ax(c, depth + 1, src)? != 0 {
                    self.eval_ax(a, depth + 1, src)?
                } else {
                    self.eval_ax(b, depth + 1, src)?
                }
            }
            ArithExpr::Assign { target, op, value } => {
                let v = self.eval_ax(value, depth + 1, src)?;
                let new = match op {
                    None => v,
                    Some(op) => {
                        let old = self.load_lvalue(target, depth, src)?;
                        binop(*op, old, v, src)?
                    }
                };
                self.store_lvalue(target, new, depth, src)?;
                new
            }
        })
    }

    // ---- [[ ]] ----

    pub(crate) fn eval_cond(&mut self, c: &CondExpr) -> FlowResult<Result<bool, ShellError>> {
        Ok(Ok(match c {
            CondExpr::Word(w) => !self.expand_string(w)?.is_empty(),
            CondExpr::Not(x) => match self.eval_cond(x)? {
                Ok(b) => !b,
                e => return Ok(e),
            },
            CondExpr::And(a, b) => match self.eval_cond(a)? {
                Ok(false) => false,
                Ok(true) => return self.eval_cond(b),
                e => return Ok(e),
            },
            CondExpr::Or(a, b) => match self.eval_cond(a)? {
                Ok(true) => true,
                Ok(false) => return self.eval_cond(b),
                e => return Ok(e),
            },
            CondExpr::Unary(op, w) => {
                let arg = self.expand_string(w)?;
                return Ok(self.unary_test(*op, &arg));
            }
            CondExpr::Binary(l, op, r) => {
                let left = self.expand_string(l)?;
                match op {
                    CondBinOp::PatEq | CondBinOp::PatNe => {
                        let pat = self.expand_pattern_ext(r, true)?;
                        let m = self.pattern_matches(&pat, &left);
                        m == (*op == CondBinOp::PatEq)
                    }
                    CondBinOp::Match => {
                        let re = self.expand_regex(r)?;
                        return Ok(self.regex_match(&left, &re));
                    }
                    _ => {
                        let right = self.expand_string(r)?;
                        if is_int_op(*op) {
                            let a = match self.eval_arith_text(&left) {
                                Ok(v) => v,
                                Err(AErr::Msg(m)) => return Ok(Err(ShellError::Arith(m))),
                                Err(AErr::Flow(f)) => return Err(f),
                            };
                            let b = match self.eval_arith_text(&right) {
                                Ok(v) => v,
                                Err(AErr::Msg(m)) => return Ok(Err(ShellError::Arith(m))),
                                Err(AErr::Flow(f)) => return Err(f),
                            };
                            int_compare(*op, a, b)
                        } else {
                            return Ok(self.binary_test(&left, *op, &right));
                        }
                    }
                }
            }
        }))
    }

    fn regex_match(&mut self, text: &str, re: &str) -> Result<bool, ShellError> {
        let compiled = regex::RegexBuilder::new(&posix_brackets(re))
            .size_limit(1 << 20)
            // POSIX's regcomp without REG_NEWLINE: `.` matches a newline too.
            .dot_matches_new_line(true)
            .case_insensitive(self.st.opts.nocasematch)
            .build();
        let compiled = match compiled {
            Ok(c) => c,
            // bash returns 2 for a bad regex without a message on stderr.
            Err(_) => return Err(ShellError::BadRegex),
        };
        match compiled.captures(text) {
            Some(caps) => {
                let mut m = std::collections::BTreeMap::new();
                for (i, g) in caps.iter().enumerate() {
                    m.insert(
                        i as i64,
                        g.map(|g| g.as_str().to_string()).unwrap_or_default(),
                    );
                }
                self.st.vars.put(
                    "BASH_REMATCH",
                    crate::vars::Var {
                        value: Value::Indexed(m),
                        attrs: 0,
                    },
                );
                Ok(true)
            }
            None => {
                self.st.vars.put(
                    "BASH_REMATCH",
                    crate::vars::Var {
                        value: Value::Indexed(Default::default()),
                        attrs: 0,
                    },
                );
                Ok(false)
            }
        }
    }

    /// A unary test of `[[ ]]` and `test`: file tests, `-z`, `-n`, `-v`, `-o`.
    pub(crate) fn unary_test(&mut self, op: char, arg: &str) -> Result<bool, ShellError> {
        use wasmsand_vfs::FileType;
        match op {
            'z' => return Ok(arg.is_empty()),
            'n' => return Ok(!arg.is_empty()),
            'v' => {
                let (name, key) = match arg.find('[') {
                    Some(i) if arg.ends_with(']') => (&arg[..i], Some(&arg[i + 1..arg.len() - 1])),
                    _ => (arg, None),
                };
                if key.is_none()
                    && let Ok(n) = name.parse::<usize>()
                {
                    return Ok(n <= self.st.positional.len());
                }
                let (rname, rsub) = self.resolve_ref(name);
                // bash looks a reference to an element up as a variable named `a[2]`: never
                // set.
                if key.is_none() && rsub.is_some() {
                    return Ok(false);
                }
                let key = key.map(str::to_string).or(rsub);
                let value = self.st.vars.get(&rname).map(|v| v.value.clone());
                let key = match (&value, key) {
                    (Some(Value::Assoc(_)), Some(k)) if k != "@" && k != "*" => Some(
                        self.expand_string(&crate::expand::runtime_subscript(&k))
                            .map_err(|_| ShellError::BadSubscript(k.clone()))?,
                    ),
                    (_, k) => k,
                };
                let whole = key.as_deref().is_some_and(|k| k == "@" || k == "*");
                return Ok(match (value, key) {
                    (Some(Value::Indexed(m)), Some(_)) if whole => !m.is_empty(),
                    (Some(Value::Assoc(m)), Some(k)) => m.contains_key(&k),
                    (Some(Value::Indexed(m)), Some(k)) => match self.eval_arith_text(&k) {
                        Ok(i) => {
                            let i = if i < 0 {
                                m.keys().next_back().map(|t| t + 1 + i).unwrap_or(i)
                            } else {
                                i
                            };
                            m.contains_key(&i)
                        }
                        Err(_) => false,
                    },
                    (Some(Value::Str(_)), Some(k)) => {
                        matches!(self.eval_arith_text(&k), Ok(0 | -1))
                    }
                    (Some(Value::Indexed(m)), None) => m.contains_key(&0),
                    (Some(Value::Assoc(m)), None) => m.contains_key("0"),
                    (Some(Value::Str(_)), None) => true,
                    _ => matches!(name, "RANDOM" | "SECONDS" | "LINENO" | "BASHPID"),
                });
            }
            'o' => return Ok(self.option_value(arg).unwrap_or(false)),
            'R' => {
                return Ok(self.st.vars.get(arg).is_some_and(|v| {
                    v.has(crate::vars::ATTR_NAMEREF)
                        && !v.has(crate::vars::ATTR_NOVALUE)
                        && !matches!(v.value, Value::Unset)
                }));
            }
            't' => return Ok(false),
            _ => {}
        }
        if arg.is_empty() {
            return Ok(false);
        }
        let path = wasmsand_vfs::path::join(&self.st.cwd, arg);
        let vfs = self.rt.vfs.lock();
        if op == 'L' || op == 'h' {
            return Ok(vfs
                .lstat(&path)
                .is_ok_and(|m| m.file_type == FileType::Symlink));
        }
        let Ok(m) = vfs.stat(&path) else {
            return Ok(false);
        };
        Ok(match op {
            'e' | 'a' => true,
            'f' => m.file_type == FileType::File,
            'd' => m.file_type == FileType::Dir,
            'c' => m.file_type == FileType::CharDevice,
            'b' | 'p' | 'S' => false,
            's' => m.size > 0 && m.file_type != FileType::Dir || m.file_type == FileType::Dir,
            'r' => m.mode & 0o400 != 0,
            'w' => m.mode & 0o200 != 0 && vfs.is_writable(&path),
            'x' => m.mode & 0o100 != 0,
            'u' => m.mode & 0o4000 != 0,
            'g' => m.mode & 0o2000 != 0,
            'k' => m.mode & 0o1000 != 0,
            'O' | 'G' => true,
            'N' => m.mtime > m.atime,
            _ => return Err(ShellError::Test(format!("-{op}: unary operator expected"))),
        })
    }

    pub(crate) fn binary_test(
        &mut self,
        left: &str,
        op: CondBinOp,
        right: &str,
    ) -> Result<bool, ShellError> {
        Ok(match op {
            CondBinOp::StrLt => left < right,
            CondBinOp::StrGt => left > right,
            CondBinOp::PatEq => left == right,
            CondBinOp::PatNe => left != right,
            CondBinOp::NewerThan | CondBinOp::OlderThan | CondBinOp::SameFile => {
                let vfs = self.rt.vfs.lock();
                let a = vfs.stat(&wasmsand_vfs::path::join(&self.st.cwd, left)).ok();
                let b = vfs
                    .stat(&wasmsand_vfs::path::join(&self.st.cwd, right))
                    .ok();
                let t = |m: &Option<wasmsand_vfs::Metadata>| {
                    m.as_ref()
                        .map(|m| m.mtime)
                        .unwrap_or(SystemTime::UNIX_EPOCH)
                };
                match op {
                    CondBinOp::NewerThan => a.is_some() && (b.is_none() || t(&a) > t(&b)),
                    CondBinOp::OlderThan => b.is_some() && (a.is_none() || t(&a) < t(&b)),
                    _ => match (&a, &b) {
                        (Some(x), Some(y)) => x.ino == y.ino,
                        _ => false,
                    },
                }
            }
            _ => {
                let parse = |s: &str| -> Result<i64, ShellError> {
                    let t = s.trim();
                    t.parse::<i64>()
                        .map_err(|_| ShellError::Test(format!("{s}: integer expression expected")))
                };
                int_compare(op, parse(left)?, parse(right)?)
            }
        })
    }
}

fn is_int_op(op: CondBinOp) -> bool {
    matches!(
        op,
        CondBinOp::IntEq
            | CondBinOp::IntNe
            | CondBinOp::IntLt
            | CondBinOp::IntLe
            | CondBinOp::IntGt
            | CondBinOp::IntGe
    )
}

fn int_compare(op: CondBinOp, a: i64, b: i64) -> bool {
    match op {
        CondBinOp::IntEq => a == b,
        CondBinOp::IntNe => a != b,
        CondBinOp::IntLt => a < b,
        CondBinOp::IntLe => a <= b,
        CondBinOp::IntGt => a > b,
        CondBinOp::IntGe => a >= b,
        _ => false,
    }
}

/// The token bash names for a negative exponent: the one its reader had looked ahead to
/// after the exponent (`2 ** -1 + 0`: `+ 0`), or the exponent's last token when nothing
/// follows (`2**-1`: `1`). Taken from the text after the last `**`.
fn exponent_token(src: &str) -> &str {
    let Some(at) = src.rfind("**") else {
        return src.trim_start();
    };
    let operand = src[at + 2..]
        .trim_start()
        .trim_start_matches(['-', '+', '!', '~', ' ', '\t']);
    let len = if operand.starts_with('(') {
        let mut depth = 0;
        operand
            .char_indices()
            .find_map(|(i, c)| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                (depth == 0).then_some(i + 1)
            })
            .unwrap_or(operand.len())
    } else {
        operand
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '#'))
            .unwrap_or(operand.len())
    };
    let rest = operand[len..].trim_start();
    if rest.is_empty() { operand } else { rest }
}

fn binop(op: ArithBinOp, x: i64, y: i64, src: &str) -> AR {
    use ArithBinOp::*;
    Ok(match op {
        BitOr => x | y,
        BitXor => x ^ y,
        BitAnd => x & y,
        Eq => (x == y) as i64,
        Ne => (x != y) as i64,
        Lt => (x < y) as i64,
        Le => (x <= y) as i64,
        Gt => (x > y) as i64,
        Ge => (x >= y) as i64,
        Shl => x.wrapping_shl(y as u32),
        Shr => x.wrapping_shr(y as u32),
        Add => x.wrapping_add(y),
        Sub => x.wrapping_sub(y),
        Mul => x.wrapping_mul(y),
        Div | Rem => {
            if y == 0 {
                let token = src
                    .rfind(['/', '%'])
                    .map(|i| src[i + 1..].trim_start())
                    .unwrap_or("0");
                return Err(AErr::Msg(format!(
                    "{}: division by 0 (error token is \"{token}\")",
                    src.trim_start()
                )));
            }
            if op == Div {
                x.wrapping_div(y)
            } else {
                x.wrapping_rem(y)
            }
        }
        Pow => {
            if y < 0 {
                return Err(AErr::Msg(format!(
                    "{}: exponent less than 0 (error token is \"{}\")",
                    src.trim_start(),
                    exponent_token(src)
                )));
            }
            let mut r: i64 = 1;
            let mut b = x;
            let mut e = y as u64;
            while e > 0 {
                if e & 1 == 1 {
                    r = r.wrapping_mul(b);
                }
                b = b.wrapping_mul(b);
                e >>= 1;
            }
            r
        }
        LogAnd => ((x != 0) && (y != 0)) as i64,
        LogOr => ((x != 0) || (y != 0)) as i64,
        Comma => y,
    })
}

fn contains_expansion(e: &ArithExpr) -> bool {
    match e {
        ArithExpr::Expansion(_) => true,
        ArithExpr::Number(_) | ArithExpr::Var(_) => false,
        ArithExpr::Elem(_, i) => contains_expansion(i),
        ArithExpr::Unary(_, x) => contains_expansion(x),
        ArithExpr::IncDec { target, .. } => match target {
            LValue::Var(_) => false,
            LValue::Elem(_, i) => contains_expansion(i),
        },
        ArithExpr::Binary(_, a, b) => contains_expansion(a) || contains_expansion(b),
        ArithExpr::Conditional(a, b, c) => {
            contains_expansion(a) || contains_expansion(b) || contains_expansion(c)
        }
        ArithExpr::Assign { target, value, .. } => {
            contains_expansion(value)
                || match target {
                    LValue::Var(_) => false,
                    LValue::Elem(_, i) => contains_expansion(i),
                }
        }
    }
}

/// Whether text starts as an array element does (`a[`), where arithmetic on a variable's
/// value would evaluate a subscript.
fn is_element_text(t: &str) -> bool {
    let name_len = t
        .bytes()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
        .count();
    name_len > 0 && !t.as_bytes()[0].is_ascii_digit() && t[name_len..].starts_with('[')
}

/// The expression with its own double quotes removed, as bash's quote removal does before it
/// evaluates (`$(( "1 + 2" * 3 ))` is 7); quotes inside `$(...)`, `${...}` and backquotes
/// belong to those and stay.
fn without_double_quotes(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut depth = 0usize;
    let mut in_backquote = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\\' if i + 1 < b.len() => {
                out.extend_from_slice(&b[i..i + 2]);
                i += 2;
                continue;
            }
            // `$"..."` is a double-quoted string too.
            b'$' if depth == 0 && !in_backquote && b.get(i + 1) == Some(&b'"') => {
                i += 1;
                continue;
            }
            b'$' if matches!(b.get(i + 1), Some(b'(' | b'{')) => {
                depth += 1;
                out.extend_from_slice(&b[i..i + 2]);
                i += 2;
                continue;
            }
            b'(' | b'{' if depth > 0 => depth += 1,
            b')' | b'}' if depth > 0 => depth -= 1,
            b'`' => in_backquote = !in_backquote,
            b'"' if depth == 0 && !in_backquote => {
                i += 1;
                continue;
            }
            _ => {}
        }
        out.push(c);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| src.to_string())
}

/// Escapes `"` and backslashes that would end or alter a double-quoted string, keeping `$`
/// expansions live.
fn dq_escape(s: &str) -> String {
    let mut out = String::new();
    // A quote after a backslash is escaped already (`\"` in a prompt is `"`).
    let mut escaped = false;
    for c in s.chars() {
        if c == '"' && !escaped {
            out.push('\\');
        }
        escaped = c == '\\' && !escaped;
        out.push(c);
    }
    out
}

/// POSIX bracket expressions in the syntax of the `regex` crate: a `]` first in the brackets is
/// a member (`[]a]`, `[^]a]`), and `[`, `\`, `&` and `~` inside are plain members (the crate
/// reads them as nested classes, escapes and set operators). `[:alpha:]` and the rest of the
/// expression are left as they are.
fn posix_brackets(re: &str) -> String {
    let chars: Vec<char> = re.chars().collect();
    let mut out = String::with_capacity(re.len() + 8);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            out.push(c);
            if let Some(&n) = chars.get(i + 1) {
                out.push(n);
            }
            i += 2;
            continue;
        }
        if c != '[' {
            out.push(c);
            i += 1;
            continue;
        }
        out.push('[');
        i += 1;
        if chars.get(i) == Some(&'^') {
            out.push('^');
            i += 1;
        }
        let mut first = true;
        while i < chars.len() {
            let c = chars[i];
            if c == ']' && !first {
                break;
            }
            first = false;
            if c == '['
                && let Some(&kind @ (':' | '=' | '.')) = chars.get(i + 1)
                && let Some(end) = (i + 2..chars.len().saturating_sub(1))
                    .find(|&j| chars[j] == kind && chars[j + 1] == ']')
            {
                out.extend(&chars[i..end + 2]);
                i = end + 2;
                continue;
            }
            if matches!(c, '[' | ']' | '\\' | '&' | '~') {
                out.push('\\');
            }
            out.push(c);
            i += 1;
        }
        if i < chars.len() {
            out.push(']');
            i += 1;
        }
    }
    out
}
