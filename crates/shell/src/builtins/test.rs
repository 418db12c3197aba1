//! `test` and `[`: POSIX argument-count rules, then `-a`/`-o`/`!`/`( )` precedence; the
//! operators themselves are `[[ ]]`'s (`eval.rs`).

use crate::error::ShellError;
use crate::interp::Interp;
use crate::syntax::ast::{COND_UNARY_OPS, CondBinOp};

impl Interp {
    pub(super) fn b_test(&mut self, args: &[String], bracket: bool) -> i32 {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let args = if bracket {
            match args.split_last() {
                Some((&"]", rest)) => rest.to_vec(),
                _ => {
                    self.err("[: missing `]'");
                    return 2;
                }
            }
        } else {
            args
        };
        let name = if bracket { "[" } else { "test" };
        match self.test_expr(&args) {
            Ok(true) => 0,
            Ok(false) => 1,
            Err(m) => {
                self.err(&format!("{name}: {m}"));
                2
            }
        }
    }

    fn test_expr(&mut self, a: &[&str]) -> Result<bool, ShellError> {
        // POSIX fixes the meaning by argument count up to four.
        match a.len() {
            0 => Ok(false),
            1 => Ok(!a[0].is_empty()),
            2 => {
                if a[0] == "!" {
                    return Ok(a[1].is_empty());
                }
                self.test_unary(a[0], a[1])
            }
            3 => {
                if let Some(op) = test_binop(a[1]) {
                    return self.test_binary(a[0], op, a[2]);
                }
                if a[1] == "-a" {
                    return Ok(!a[0].is_empty() && !a[2].is_empty());
                }
                if a[1] == "-o" {
                    return Ok(!a[0].is_empty() || !a[2].is_empty());
                }
                if a[0] == "!" {
                    return self.test_expr(&a[1..]).map(|b| !b);
                }
                if a[0] == "(" && a[2] == ")" {
                    return Ok(!a[1].is_empty());
                }
                Err(ShellError::Test(format!(
                    "{}: binary operator expected",
                    a[1]
                )))
            }
            4 if a[0] == "!" => self.test_expr(&a[1..]).map(|b| !b),
            4 if a[0] == "(" && a[3] == ")" => self.test_expr(&a[1..3]),
            _ => {
                let mut pos = 0;
                let r = self.test_or(a, &mut pos)?;
                if pos < a.len() {
                    return Err(ShellError::Test(format!("{}: unexpected argument", a[pos])));
                }
                Ok(r)
            }
        }
    }

    fn test_or(&mut self, a: &[&str], pos: &mut usize) -> Result<bool, ShellError> {
        let mut v = self.test_and(a, pos)?;
        while *pos < a.len() && a[*pos] == "-o" {
            *pos += 1;
            let r = self.test_and(a, pos)?;
            v = v || r;
        }
        Ok(v)
    }

    fn test_and(&mut self, a: &[&str], pos: &mut usize) -> Result<bool, ShellError> {
        let mut v = self.test_not(a, pos)?;
        while *pos < a.len() && a[*pos] == "-a" {
            *pos += 1;
            let r = self.test_not(a, pos)?;
            v = v && r;
        }
        Ok(v)
    }

    fn test_not(&mut self, a: &[&str], pos: &mut usize) -> Result<bool, ShellError> {
        if *pos < a.len() && a[*pos] == "!" {
            *pos += 1;
            return self.test_not(a, pos).map(|b| !b);
        }
        self.test_primary(a, pos)
    }

    fn test_primary(&mut self, a: &[&str], pos: &mut usize) -> Result<bool, ShellError> {
        let Some(&first) = a.get(*pos) else {
            return Err(ShellError::Test("argument expected".into()));
        };
        if first == "(" {
            *pos += 1;
            let v = self.test_or(a, pos)?;
            if a.get(*pos) != Some(&")") {
                return Err(ShellError::Test("`)' expected".into()));
            }
            *pos += 1;
            return Ok(v);
        }
        if let Some(&op) = a.get(*pos + 1)
            && let Some(bop) = test_binop(op)
            && *pos + 2 < a.len()
        {
            let r = self.test_binary(first, bop, a[*pos + 2]);
            *pos += 3;
            return r;
        }
        if first.len() == 2 && first.starts_with('-') && *pos + 1 < a.len() {
            let r = self.test_unary(first, a[*pos + 1]);
            *pos += 2;
            return r;
        }
        *pos += 1;
        Ok(!first.is_empty())
    }

    fn test_unary(&mut self, op: &str, arg: &str) -> Result<bool, ShellError> {
        let mut c = op.chars();
        match (c.next(), c.next(), c.next()) {
            (Some('-'), Some(ch), None) if COND_UNARY_OPS.contains(ch) => self.unary_test(ch, arg),
            _ => Err(ShellError::Test(format!("{op}: unary operator expected"))),
        }
    }

    fn test_binary(&mut self, l: &str, op: CondBinOp, r: &str) -> Result<bool, ShellError> {
        self.binary_test(l, op, r)
    }
}

/// `test`'s binary operators: `[[ ]]`'s but `=~`.
fn test_binop(op: &str) -> Option<CondBinOp> {
    CondBinOp::from_word(op).filter(|op| *op != CondBinOp::Match)
}
