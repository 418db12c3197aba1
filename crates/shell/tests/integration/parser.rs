//! AST tests for each construct, and error messages checked against GNU bash 5.2.15 on this
//! machine (the command used is in a comment next to each case).

use wasmsand_shell::ast::*;
use wasmsand_shell::{ParseError, parse};

fn script(src: &str) -> Script {
    parse(src).unwrap_or_else(|e| panic!("{src:?}: {e}"))
}

fn first_command(src: &str) -> Command {
    script(src).items[0].and_or.first.commands[0].clone()
}

fn simple(src: &str) -> SimpleCommand {
    match first_command(src) {
        Command::Simple(s) => s,
        other => panic!("not simple: {other:?}"),
    }
}

fn compound(src: &str) -> CompoundCommand {
    match first_command(src) {
        Command::Compound(c, _) => c,
        other => panic!("not compound: {other:?}"),
    }
}

/// The parts of the second word of `echo <w>`.
fn word(w: &str) -> Vec<WordPart> {
    match &simple(&format!("echo {w}")).words[1] {
        Arg::Word(w) => w.parts.clone(),
        other => panic!("not a word: {other:?}"),
    }
}

fn param(w: &str) -> ParamExp {
    match word(w).as_slice() {
        [WordPart::Param(p)] => (**p).clone(),
        other => panic!("not a param: {other:?}"),
    }
}

fn lit(s: &str) -> WordPart {
    WordPart::Literal(s.into())
}

fn q(s: &str) -> WordPart {
    WordPart::Quoted(s.into())
}

fn lw(s: &str) -> Word {
    Word::literal(s)
}

fn var(name: &str) -> WordPart {
    WordPart::Param(Box::new(ParamExp {
        param: Param::Named(name.into()),
        subscript: None,
        indirect: false,
        op: ParamOp::None,
        bare: true,
    }))
}

fn err(src: &str) -> ParseError {
    match parse(src) {
        Ok(s) => panic!("{src:?} parsed: {s:?}"),
        Err(e) => e,
    }
}

fn arith(src: &str) -> ArithExpr {
    match word(&format!("$(({src}))")).as_slice() {
        [WordPart::Arith(a)] => a.expr.clone().unwrap_or_else(|e| panic!("{src}: {e}")),
        other => panic!("not arith: {other:?}"),
    }
}

fn words_of(s: &SimpleCommand) -> Vec<String> {
    s.words
        .iter()
        .map(|a| match a {
            Arg::Word(w) => w.as_literal().unwrap_or("?").to_string(),
            Arg::Assignment(a) => format!("{}=", a.name),
        })
        .collect()
}

// ----- lists and pipelines -----

#[test]
fn list_separators_and_background() {
    let s = script("a; b & c\nd && e || f");
    assert_eq!(s.items.len(), 4);
    assert!(!s.items[0].background);
    assert!(s.items[1].background);
    let ao = &s.items[3].and_or;
    assert_eq!(ao.rest.len(), 2);
    assert_eq!(ao.rest[0].0, AndOrOp::And);
    assert_eq!(ao.rest[1].0, AndOrOp::Or);
}

#[test]
fn newline_after_and_or_and_pipe() {
    let s = script("a &&\n\n b |\n c");
    assert_eq!(s.items.len(), 1);
    assert_eq!(s.items[0].and_or.rest[0].1.commands.len(), 2);
}

#[test]
fn pipeline_negation_time_and_pipe_amp() {
    let p = script("! time -p a | b |& c").items[0].and_or.first.clone();
    assert!(p.negated && p.timed);
    assert_eq!(p.commands.len(), 3);
    let Command::Simple(b) = &p.commands[1] else {
        panic!()
    };
    assert_eq!(b.redirects.len(), 1);
    assert_eq!(b.redirects[0].fd, Some(2));
    assert_eq!(b.redirects[0].op, RedirOp::DupWrite);
}

#[test]
fn comments_only_at_word_start() {
    let s = simple("echo a#b # comment here");
    assert_eq!(words_of(&s), ["echo", "a#b"]);
    assert!(script("# only a comment\n\n").items.is_empty());
    assert_eq!(script("a;#c\nb").items.len(), 2);
}

#[test]
fn empty_script() {
    assert!(script("").items.is_empty());
    assert!(script("  \n\t\n").items.is_empty());
}

#[test]
fn line_numbers_of_simple_commands() {
    let s = script("a\n\nb \\\nc\nd");
    let lines: Vec<usize> = s
        .items
        .iter()
        .map(|i| match &i.and_or.first.commands[0] {
            Command::Simple(s) => s.line,
            _ => 0,
        })
        .collect();
    assert_eq!(lines, [1, 3, 5]);
}

// ----- simple commands and assignments -----

#[test]
fn prefix_assignments() {
    let s = simple("A=1 B+=2 cmd C=3");
    assert_eq!(s.assignments.len(), 2);
    assert_eq!(s.assignments[0].name, "A");
    assert!(!s.assignments[0].append);
    assert!(s.assignments[1].append);
    assert_eq!(words_of(&s), ["cmd", "C=3"]);
}

#[test]
fn assignment_alone_and_empty_value() {
    let s = simple("x= y=2");
    assert!(s.words.is_empty());
    assert_eq!(s.assignments[0].value, AssignValue::Scalar(Word::default()));
}

#[test]
fn array_assignments() {
    let s = simple("a=(x 'y z' [3]=w\n # comment\n v) a[1]=v a+=(z)");
    let AssignValue::Array(el) = &s.assignments[0].value else {
        panic!()
    };
    assert_eq!(el.len(), 4);
    assert_eq!(el[1].value.parts, vec![q("y z")]);
    assert_eq!(el[2].key, Some(lw("3")));
    assert_eq!(s.assignments[1].index, Some(lw("1")));
    assert!(s.assignments[2].append);
    assert!(matches!(s.assignments[2].value, AssignValue::Array(_)));
}

#[test]
fn subscript_with_expansion_and_quotes() {
    let s = simple("m[\"a b\"]=1 a[$i+1]=2");
    assert_eq!(
        s.assignments[0].index.as_ref().unwrap().parts,
        vec![WordPart::DoubleQuoted(vec![q("a b")])]
    );
    assert_eq!(
        s.assignments[1].index.as_ref().unwrap().parts,
        vec![var("i"), lit("+1")]
    );
}

#[test]
fn declaration_builtins_take_assignments() {
    let s = simple("declare -A m=([k]=v [j]=w) x=$y");
    assert_eq!(words_of(&s), ["declare", "-A", "m=", "x="]);
    let Arg::Assignment(m) = &s.words[2] else {
        panic!()
    };
    let AssignValue::Array(el) = &m.value else {
        panic!()
    };
    assert_eq!(el[0].key, Some(lw("k")));
    // Not for other commands: `echo a=(x)` is a syntax error in bash.
    assert_eq!(words_of(&simple("echo x=1")), ["echo", "x=1"]);
}

#[test]
fn not_assignments() {
    assert_eq!(words_of(&simple("cmd 1x=2")), ["cmd", "1x=2"]);
    let s = simple("'a'=1");
    assert!(s.assignments.is_empty());
    // Before the command word bash reads a subscript to its `]`, across blanks: without one
    // the text ends too soon (`bash -c 'a[1 =2'`: unexpected EOF ... matching `]').
    let e = parse("a[1 =2").unwrap_err();
    assert!(e.message.contains("matching `]'"), "{}", e.message);
    assert_eq!(words_of(&simple("echo a[1 =2")), ["echo", "a[1", "=2"]);
}

// ----- redirections -----

fn redirs(src: &str) -> Vec<Redirect> {
    simple(src).redirects
}

#[test]
fn redirection_operators() {
    let r = redirs("cmd <in >out >>app 2>err 2>&1 >&2 &>all &>>alla 3<&0 4>&- 5<>rw >|clob");
    let ops: Vec<(Option<u32>, RedirOp)> = r.iter().map(|r| (r.fd, r.op)).collect();
    assert_eq!(
        ops,
        [
            (None, RedirOp::Read),
            (None, RedirOp::Write),
            (None, RedirOp::Append),
            (Some(2), RedirOp::Write),
            (Some(2), RedirOp::DupWrite),
            (None, RedirOp::DupWrite),
            (None, RedirOp::WriteAll),
            (None, RedirOp::AppendAll),
            (Some(3), RedirOp::DupRead),
            (Some(4), RedirOp::DupWrite),
            (Some(5), RedirOp::ReadWrite),
            (None, RedirOp::Clobber),
        ]
    );
    assert_eq!(r[4].target, RedirTarget::Word(lw("1")));
    assert_eq!(r[9].target, RedirTarget::Word(lw("-")));
}

#[test]
fn redirection_before_command_and_digits_word() {
    let s = simple(">out echo 12 a2>x");
    assert_eq!(words_of(&s), ["echo", "12", "a2"]);
    assert_eq!(s.redirects.len(), 2);
    assert_eq!(s.redirects[1].fd, None);
}

#[test]
fn here_string() {
    let r = redirs("cat <<< \"$x y\"");
    assert_eq!(r[0].op, RedirOp::HereString);
}

fn heredoc(r: &Redirect) -> HereDoc {
    match &r.target {
        RedirTarget::HereDoc(h) => h.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn heredoc_unquoted_expands() {
    let h = heredoc(&redirs("cat <<EOF\nhi $x \"q\" \\$y\nEOF\n")[0]);
    assert_eq!(h.delimiter, "EOF");
    assert!(!h.quoted);
    assert_eq!(
        h.body.parts,
        vec![q("hi "), var("x"), q(" \"q\" "), q("$"), q("y\n")]
    );
}

#[test]
fn heredoc_quoted_is_literal() {
    for src in [
        "cat <<'EOF'\n$x `y`\nEOF",
        "cat <<\"EOF\"\n$x `y`\nEOF",
        "cat <<\\EOF\n$x `y`\nEOF",
        "cat <<E\"O\"F\n$x `y`\nEOF",
    ] {
        let h = heredoc(&redirs(src)[0]);
        assert!(h.quoted, "{src}");
        assert_eq!(h.delimiter, "EOF");
        assert_eq!(h.body.parts, vec![q("$x `y`\n")], "{src}");
    }
}

#[test]
fn heredoc_strip_tabs() {
    let h = heredoc(&redirs("cat <<-EOF\n\t\tindented\n\tEOF\necho after")[0]);
    assert!(h.strip_tabs);
    assert_eq!(h.body.parts, vec![q("indented\n")]);
}

#[test]
fn two_heredocs_on_one_line() {
    // bash -c $'cat <<E1; cat <<E2\none\nE1\ntwo\nE2'  prints one, two
    let s = script("cat <<E1; cat <<'E2'\none\nE1\ntwo\nE2\necho end");
    assert_eq!(s.items.len(), 3);
    let body = |i: usize| match &s.items[i].and_or.first.commands[0] {
        Command::Simple(c) => heredoc(&c.redirects[0]).body,
        _ => panic!(),
    };
    assert_eq!(body(0).parts, vec![q("one\n")]);
    assert_eq!(body(1).parts, vec![q("two\n")]);
}

#[test]
fn heredoc_feeding_a_loop_and_inside_substitution() {
    let s = script("cat <<EOF | while read l; do echo $l; done\na\nb\nEOF\n");
    let p = &s.items[0].and_or.first;
    let Command::Simple(c) = &p.commands[0] else {
        panic!()
    };
    assert_eq!(heredoc(&c.redirects[0]).body.parts, vec![q("a\nb\n")]);
    let w = word("\"$(cat <<X\nin sub\nX\n)\"");
    let WordPart::DoubleQuoted(inner) = &w[0] else {
        panic!()
    };
    let WordPart::CommandSubst { script: sub, .. } = &inner[0] else {
        panic!()
    };
    let Command::Simple(c) = &sub.items[0].and_or.first.commands[0] else {
        panic!()
    };
    assert_eq!(heredoc(&c.redirects[0]).body.parts, vec![q("in sub\n")]);
}

#[test]
fn heredoc_without_delimiter_runs_to_end() {
    // bash -c $'cat <<EOF\nabc' only warns and prints abc
    let h = heredoc(&redirs("cat <<EOF\nabc")[0]);
    assert_eq!(h.body.parts, vec![q("abc")]);
}

#[test]
fn heredoc_on_compound_and_function() {
    let s = script("while read x; do :; done <<EOF\n1\nEOF\nf() { cat; } <<E\nz\nE\n");
    let Command::Compound(_, r) = &s.items[0].and_or.first.commands[0] else {
        panic!()
    };
    assert_eq!(heredoc(&r[0]).body.parts, vec![q("1\n")]);
    let Command::FunctionDef(f) = &s.items[1].and_or.first.commands[0] else {
        panic!()
    };
    let Command::Compound(_, r) = f.body.as_ref() else {
        panic!()
    };
    assert_eq!(heredoc(&r[0]).body.parts, vec![q("z\n")]);
}

// ----- compound commands -----

#[test]
fn subshell_and_group() {
    assert!(matches!(compound("( a; b )"), CompoundCommand::Subshell(s) if s.items.len() == 2));
    assert!(matches!(compound("{ a; b; }"), CompoundCommand::Group(s) if s.items.len() == 2));
    assert!(matches!(compound("{ a\n}"), CompoundCommand::Group(_)));
    assert!(matches!(compound("(a)"), CompoundCommand::Subshell(_)));
}

#[test]
fn braces_are_words_outside_command_position() {
    assert_eq!(words_of(&simple("echo } {")), ["echo", "}", "{"]);
    assert!(matches!(first_command("{a,b}"), Command::Simple(_)));
}

#[test]
fn if_elif_else() {
    let CompoundCommand::If {
        branches,
        else_body,
    } = compound("if a; then b; elif c\nthen d; else e; fi")
    else {
        panic!()
    };
    assert_eq!(branches.len(), 2);
    assert!(else_body.is_some());
}

#[test]
fn keywords_only_in_command_position() {
    assert_eq!(
        words_of(&simple("echo if then fi done")),
        ["echo", "if", "then", "fi", "done"]
    );
    assert!(matches!(
        compound("if if a; then b; fi; then c; fi"),
        CompoundCommand::If { .. }
    ));
    assert_eq!(words_of(&simple("iffy")), ["iffy"]);
}

#[test]
fn while_until() {
    assert!(matches!(
        compound("while a; do b; done"),
        CompoundCommand::While { .. }
    ));
    assert!(matches!(
        compound("until a\ndo\nb\ndone"),
        CompoundCommand::Until { .. }
    ));
}

#[test]
fn for_loops() {
    let CompoundCommand::For { var, words, .. } =
        compound("for x in a {1..2} \"c d\"; do echo $x; done")
    else {
        panic!()
    };
    assert_eq!(var, "x");
    assert_eq!(words.unwrap().len(), 3);
    for src in ["for x; do :; done", "for x do :; done", "for x\ndo :; done"] {
        let CompoundCommand::For { words, .. } = compound(src) else {
            panic!()
        };
        assert_eq!(words, None, "{src}");
    }
    let CompoundCommand::For { words, .. } = compound("for x in; do :; done") else {
        panic!()
    };
    assert_eq!(words, Some(vec![]));
    assert!(matches!(
        compound("for x in a\ndo :; done"),
        CompoundCommand::For { .. }
    ));
    assert!(matches!(
        compound("for x in a; { :; }"),
        CompoundCommand::For { .. }
    ));
    assert!(matches!(
        compound("select x in a b; do :; done"),
        CompoundCommand::Select { .. }
    ));
}

#[test]
fn c_style_for() {
    let CompoundCommand::ArithFor {
        init, cond, step, ..
    } = compound("for ((i=0; i<n; i++)); do :; done")
    else {
        panic!()
    };
    assert_eq!(init.unwrap().source, "i=0");
    assert!(matches!(
        cond.unwrap().expr,
        Ok(ArithExpr::Binary(ArithBinOp::Lt, _, _))
    ));
    assert!(step.is_some());
    let CompoundCommand::ArithFor {
        init, cond, step, ..
    } = compound("for ((;;)) { break; }")
    else {
        panic!()
    };
    assert!(init.is_none() && cond.is_none() && step.is_none());
}

#[test]
fn case_command() {
    let CompoundCommand::Case { word, items } =
        compound("case $x in\n a|b) one;;\n (c*) two ;&\n d) three;;&\n *) ;;\n e) last\nesac")
    else {
        panic!()
    };
    assert_eq!(word.parts, vec![var("x")]);
    assert_eq!(items.len(), 5);
    assert_eq!(items[0].patterns, vec![lw("a"), lw("b")]);
    assert_eq!(items[1].terminator, CaseTerminator::FallThrough);
    assert_eq!(items[2].terminator, CaseTerminator::Continue);
    assert!(items[3].body.items.is_empty());
    assert_eq!(items[4].terminator, CaseTerminator::Break);
    let CompoundCommand::Case { items, .. } = compound("case a in esac") else {
        panic!()
    };
    assert!(items.is_empty());
    // `esac` as an argument is a plain word.
    let CompoundCommand::Case { items, .. } = compound("case a in a) echo esac;; esac") else {
        panic!()
    };
    assert_eq!(items.len(), 1);
}

#[test]
fn case_inside_command_substitution() {
    // bash -c 'case x in x) echo $(case y in y) echo inner;; esac);; esac'  prints inner
    let w = word("$(case x in x) echo ;; esac)");
    let WordPart::CommandSubst { script: s, .. } = &w[0] else {
        panic!()
    };
    assert!(matches!(
        &s.items[0].and_or.first.commands[0],
        Command::Compound(CompoundCommand::Case { .. }, _)
    ));
}

#[test]
fn functions() {
    for src in [
        "f() { :; }",
        "function f { :; }",
        "function f() { :; }",
        "f ()\n{\n:\n}",
        "f() ( :; )",
        "function f if true; then :; fi",
    ] {
        let Command::FunctionDef(f) = first_command(src) else {
            panic!("{src}")
        };
        assert_eq!(f.name, "f");
    }
    let Command::FunctionDef(f) = first_command(":(){ :|:& };:") else {
        panic!()
    };
    assert_eq!(f.name, ":");
    let Command::FunctionDef(f) = first_command("f() { :; } >/dev/null 2>&1") else {
        panic!()
    };
    let Command::Compound(_, r) = f.body.as_ref() else {
        panic!()
    };
    assert_eq!(r.len(), 2);
}

#[test]
fn arith_command_and_fallback_to_subshells() {
    let CompoundCommand::Arith(a) = compound("(( x = 1 + 2 ))") else {
        panic!()
    };
    assert!(matches!(a.expr, Ok(ArithExpr::Assign { .. })));
    // bash -c '((echo a); (echo b))' runs two subshells
    assert!(matches!(
        compound("((echo a); (echo b))"),
        CompoundCommand::Subshell(_)
    ));
    let w = word("$((echo a); (echo b))");
    assert!(matches!(w[0], WordPart::CommandSubst { .. }));
}

#[test]
fn compound_redirections() {
    let Command::Compound(_, r) = first_command("{ a; } > f 2>&1") else {
        panic!()
    };
    assert_eq!(r.len(), 2);
}

// ----- [[ ]] -----

fn cond(src: &str) -> CondExpr {
    match compound(src) {
        CompoundCommand::Cond(c) => c,
        other => panic!("{other:?}"),
    }
}

#[test]
fn cond_expressions() {
    assert_eq!(cond("[[ -f x ]]"), CondExpr::Unary('f', lw("x")));
    assert_eq!(cond("[[ x ]]"), CondExpr::Word(lw("x")));
    assert!(matches!(
        cond("[[ a == b* ]]"),
        CondExpr::Binary(_, CondBinOp::PatEq, _)
    ));
    assert!(matches!(
        cond("[[ a = b ]]"),
        CondExpr::Binary(_, CondBinOp::PatEq, _)
    ));
    assert!(matches!(
        cond("[[ a != b ]]"),
        CondExpr::Binary(_, CondBinOp::PatNe, _)
    ));
    assert!(matches!(
        cond("[[ a < b ]]"),
        CondExpr::Binary(_, CondBinOp::StrLt, _)
    ));
    assert!(matches!(
        cond("[[ a > b ]]"),
        CondExpr::Binary(_, CondBinOp::StrGt, _)
    ));
    assert!(matches!(
        cond("[[ 1 -le 2 ]]"),
        CondExpr::Binary(_, CondBinOp::IntLe, _)
    ));
    assert!(matches!(
        cond("[[ a -nt b ]]"),
        CondExpr::Binary(_, CondBinOp::NewerThan, _)
    ));
    let CondExpr::Or(l, _) = cond("[[ ! -z $a && ( b || c ) || d ]]") else {
        panic!()
    };
    let CondExpr::And(n, p) = *l else { panic!() };
    assert!(matches!(*n, CondExpr::Not(_)));
    assert!(matches!(*p, CondExpr::Or(_, _)));
}

#[test]
fn cond_regex_keeps_parens_and_quotes() {
    let CondExpr::Binary(_, CondBinOp::Match, re) = cond("[[ $x =~ ^(a|b)[0-9]+\" x\"$ ]]") else {
        panic!()
    };
    assert_eq!(
        re.parts,
        vec![
            lit("^(a|b)[0-9]+"),
            WordPart::DoubleQuoted(vec![q(" x")]),
            lit("$")
        ]
    );
}

#[test]
fn cond_words_not_brace_expanded() {
    assert_eq!(cond("[[ {a,b} ]]"), CondExpr::Word(lw("{a,b}")));
}

// ----- words and quoting -----

#[test]
fn quoting() {
    assert_eq!(word("'a b'"), vec![q("a b")]);
    assert_eq!(word("a\\ b"), vec![lit("a"), q(" "), lit("b")]);
    assert_eq!(
        word("\"x $y \\$ \\a\""),
        vec![WordPart::DoubleQuoted(vec![
            q("x "),
            var("y"),
            q(" "),
            q("$"),
            q(" \\a")
        ])]
    );
    assert_eq!(
        word("$\"loc\""),
        vec![WordPart::DoubleQuoted(vec![q("loc")])]
    );
    assert_eq!(word("a\\\nb"), vec![lit("ab")]);
    assert_eq!(
        word("\"a\\\nb\""),
        vec![WordPart::DoubleQuoted(vec![q("ab")])]
    );
    assert_eq!(
        word("\"it's\""),
        vec![WordPart::DoubleQuoted(vec![q("it's")])]
    );
}

#[test]
fn ansi_c_quoting() {
    assert_eq!(
        word(r"$'a\tb\n\x41\101\u00e9\cA\e\\\'\q'"),
        vec![q("a\tb\nAAé\u{1}\u{1b}\\'\\q")]
    );
    // Inside double quotes `$'` is not special.
    assert_eq!(
        word("\"$'x'\""),
        vec![WordPart::DoubleQuoted(vec![q("$'x'")])]
    );
}

#[test]
fn special_parameters() {
    for (src, p) in [
        ("$@", Param::Special('@')),
        ("$*", Param::Special('*')),
        ("$#", Param::Special('#')),
        ("$?", Param::Special('?')),
        ("$$", Param::Special('$')),
        ("$!", Param::Special('!')),
        ("$-", Param::Special('-')),
        ("$0", Param::Positional(0)),
        ("$1", Param::Positional(1)),
        ("${10}", Param::Positional(10)),
        ("${#}", Param::Special('#')),
    ] {
        assert_eq!(param(src).param, p, "{src}");
    }
    // `$10` is `$1` followed by `0`.
    assert_eq!(word("$10").len(), 2);
    assert_eq!(word("$"), vec![lit("$")]);
    assert_eq!(word("a$"), vec![lit("a$")]);
    assert_eq!(word("$%"), vec![lit("$%")]);
}

#[test]
fn parameter_operators() {
    let d = param("${x:-a b}");
    assert_eq!(
        d.op,
        ParamOp::Default {
            colon: true,
            word: Word {
                parts: vec![lit("a b")]
            }
        }
    );
    assert!(matches!(
        param("${x-y}").op,
        ParamOp::Default { colon: false, .. }
    ));
    assert!(matches!(
        param("${x:=y}").op,
        ParamOp::Assign { colon: true, .. }
    ));
    assert!(matches!(
        param("${x=y}").op,
        ParamOp::Assign { colon: false, .. }
    ));
    assert!(matches!(
        param("${x:?y}").op,
        ParamOp::Error { colon: true, .. }
    ));
    assert!(matches!(
        param("${x?}").op,
        ParamOp::Error { colon: false, .. }
    ));
    assert!(matches!(
        param("${x:+y}").op,
        ParamOp::Alternate { colon: true, .. }
    ));
    assert!(matches!(
        param("${x+y}").op,
        ParamOp::Alternate { colon: false, .. }
    ));
    assert_eq!(param("${#x}").op, ParamOp::Length);
    let p = param("${#arr[@]}");
    assert_eq!((p.op, p.subscript), (ParamOp::Length, Some(Subscript::At)));
    assert!(matches!(
        param("${x#a*}").op,
        ParamOp::RemovePrefix { longest: false, .. }
    ));
    assert!(matches!(
        param("${x##a*}").op,
        ParamOp::RemovePrefix { longest: true, .. }
    ));
    assert!(matches!(
        param("${x%a}").op,
        ParamOp::RemoveSuffix { longest: false, .. }
    ));
    assert!(matches!(
        param("${x%%a}").op,
        ParamOp::RemoveSuffix { longest: true, .. }
    ));
    for (src, m) in [
        ("${x/a/b}", ReplaceMode::First),
        ("${x//a/b}", ReplaceMode::All),
        ("${x/#a/b}", ReplaceMode::Prefix),
        ("${x/%a/b}", ReplaceMode::Suffix),
    ] {
        let ParamOp::Replace {
            mode,
            pattern,
            replacement,
        } = param(src).op
        else {
            panic!()
        };
        assert_eq!((mode, pattern, replacement), (m, lw("a"), lw("b")), "{src}");
    }
    let ParamOp::Replace { replacement, .. } = param("${x/a}").op else {
        panic!()
    };
    assert_eq!(replacement, Word::default());
    assert!(matches!(
        param("${x^}").op,
        ParamOp::Case {
            upper: true,
            all: false,
            ..
        }
    ));
    assert!(matches!(
        param("${x^^}").op,
        ParamOp::Case {
            upper: true,
            all: true,
            ..
        }
    ));
    assert!(matches!(
        param("${x,}").op,
        ParamOp::Case {
            upper: false,
            all: false,
            ..
        }
    ));
    assert!(matches!(
        param("${x,,[ab]}").op,
        ParamOp::Case {
            upper: false,
            all: true,
            ..
        }
    ));
    assert_eq!(param("${x@Q}").op, ParamOp::Transform('Q'));
}

#[test]
fn substring() {
    let ParamOp::Substring { offset, length } = param("${x:1:2}").op else {
        panic!()
    };
    assert_eq!(offset.expr, Ok(ArithExpr::Number(1)));
    assert_eq!(length.unwrap().expr, Ok(ArithExpr::Number(2)));
    let ParamOp::Substring { offset, length } = param("${x: -1}").op else {
        panic!()
    };
    assert!(matches!(
        offset.expr,
        Ok(ArithExpr::Unary(ArithUnaryOp::Neg, _))
    ));
    assert!(length.is_none());
    let ParamOp::Substring { offset, .. } = param("${x:a?1:2:$n}").op else {
        panic!()
    };
    assert!(matches!(offset.expr, Ok(ArithExpr::Conditional(..))));
    let ParamOp::Substring { offset, .. } = param("${@:2}").op else {
        panic!()
    };
    assert_eq!(offset.expr, Ok(ArithExpr::Number(2)));
}

#[test]
fn indirection_arrays_and_keys() {
    let p = param("${!name}");
    assert!(p.indirect && p.op == ParamOp::None);
    assert!(param("${!name:-d}").indirect);
    assert_eq!(param("${!pre*}").op, ParamOp::PrefixNames { star: true });
    assert_eq!(param("${!pre@}").op, ParamOp::PrefixNames { star: false });
    assert_eq!(param("${!arr[@]}").op, ParamOp::Keys { star: false });
    assert_eq!(param("${!arr[*]}").op, ParamOp::Keys { star: true });
    assert_eq!(param("${a[@]}").subscript, Some(Subscript::At));
    assert_eq!(param("${a[*]}").subscript, Some(Subscript::Star));
    assert_eq!(
        param("${a[i+1]}").subscript,
        Some(Subscript::Index(lw("i+1")))
    );
    assert_eq!(param("${!}").param, Param::Special('!'));
}

#[test]
fn nested_parameter_words() {
    let ParamOp::Default { word, .. } = param("${a:-${b:-\"c}\"}}").op else {
        panic!()
    };
    let [WordPart::Param(inner)] = word.parts.as_slice() else {
        panic!("{word:?}")
    };
    let ParamOp::Default {
        word: inner_word, ..
    } = &inner.op
    else {
        panic!()
    };
    assert_eq!(
        inner_word.parts,
        vec![WordPart::DoubleQuoted(vec![q("c}")])]
    );
    // A bare `{` does not nest: bash reads `${a:-{x}` and then a literal `}`.
    let parts = self::word("${a:-{x}}");
    let [WordPart::Param(p), tail] = parts.as_slice() else {
        panic!("{parts:?}")
    };
    let ParamOp::Default { word, .. } = &p.op else {
        panic!()
    };
    assert_eq!(*word, lw("{x"));
    assert_eq!(*tail, lit("}"));
}

#[test]
fn bad_substitution_is_deferred() {
    // bash -c 'echo ${}' fails at run time: bash: line 1: ${}: bad substitution (status 1)
    assert_eq!(word("${}"), vec![WordPart::BadSubst("${}".into())]);
    assert_eq!(word("${a b}"), vec![WordPart::BadSubst("${a b}".into())]);
}

#[test]
fn command_substitution_and_backticks() {
    let w = word("$(echo a; echo b)");
    let WordPart::CommandSubst { script: s, .. } = &w[0] else {
        panic!()
    };
    assert_eq!(s.items.len(), 2);
    let w = word("`echo \\`echo hi\\``");
    let WordPart::CommandSubst { script: s, .. } = &w[0] else {
        panic!()
    };
    let Command::Simple(c) = &s.items[0].and_or.first.commands[0] else {
        panic!()
    };
    assert!(
        matches!(&c.words[1], Arg::Word(w) if matches!(w.parts[0], WordPart::CommandSubst { .. }))
    );
    assert!(
        matches!(word("$( )")[0], WordPart::CommandSubst { script: ref s, .. } if s.items.is_empty())
    );
    assert!(matches!(
        word("<(ls)")[0],
        WordPart::ProcessSubst { output: false, .. }
    ));
    assert!(matches!(
        word(">(cat)")[0],
        WordPart::ProcessSubst { output: true, .. }
    ));
}

#[test]
fn tilde() {
    assert_eq!(word("~"), vec![WordPart::Tilde(String::new())]);
    assert_eq!(word("~/x"), vec![WordPart::Tilde(String::new()), lit("/x")]);
    assert_eq!(
        word("~bob/x"),
        vec![WordPart::Tilde("bob".into()), lit("/x")]
    );
    assert_eq!(word("a~"), vec![lit("a~")]);
    assert_eq!(word("'~'"), vec![q("~")]);
    let s = simple("P=~/a:~b/c");
    let AssignValue::Scalar(w) = &s.assignments[0].value else {
        panic!()
    };
    assert_eq!(
        w.parts,
        vec![
            WordPart::Tilde(String::new()),
            lit("/a:"),
            WordPart::Tilde("b".into()),
            lit("/c")
        ]
    );
}

#[test]
fn brace_expansion() {
    // bash -c 'echo a{b,c}d {1..5..2} {a..e} {a,b{c,d}} {x} {,}'
    assert_eq!(
        word("a{b,c}d"),
        vec![
            lit("a"),
            WordPart::Brace(BraceExp::List(vec![lw("b"), lw("c")])),
            lit("d")
        ]
    );
    assert_eq!(
        word("{1..10..2}"),
        vec![WordPart::Brace(BraceExp::Seq {
            start: "1".into(),
            end: "10".into(),
            step: Some("2".into())
        })]
    );
    assert_eq!(
        word("{a..e}"),
        vec![WordPart::Brace(BraceExp::Seq {
            start: "a".into(),
            end: "e".into(),
            step: None
        })]
    );
    let nested = word("{a,b{c,d}}");
    let [WordPart::Brace(BraceExp::List(alts))] = nested.as_slice() else {
        panic!()
    };
    assert!(matches!(alts[1].parts[1], WordPart::Brace(_)));
    assert_eq!(word("{x}"), vec![lit("{x}")]);
    assert_eq!(word("{a..1}"), vec![lit("{a..1}")]);
    assert_eq!(
        word("{,}"),
        vec![WordPart::Brace(BraceExp::List(vec![
            Word::default(),
            Word::default()
        ]))]
    );
    assert_eq!(word("'{a,b}'"), vec![q("{a,b}")]);
    assert_eq!(word("{a\\,b}"), vec![lit("{a"), q(","), lit("b}")]);
    let w = word("{$x,b}");
    assert!(matches!(&w[0], WordPart::Brace(BraceExp::List(a)) if a[0].parts == vec![var("x")]));
    // Unmatched braces stay literal; the matched inner pair still expands.
    let w = word("{a,{b,c}");
    assert_eq!(w[0], lit("{a,"));
    // Not in assignments.
    let s = simple("x={a,b}");
    assert_eq!(s.assignments[0].value, AssignValue::Scalar(lw("{a,b}")));
}

#[test]
fn glob_characters_stay_unquoted_literals() {
    assert_eq!(word("*.t?t[ab]"), vec![lit("*.t?t[ab]")]);
    assert_eq!(
        word("\"*\"\\?"),
        vec![WordPart::DoubleQuoted(vec![q("*")]), q("?")]
    );
}

// ----- arithmetic -----

#[test]
fn arith_precedence_and_associativity() {
    use ArithBinOp::*;
    use ArithExpr::*;
    let n = |v| Box::new(Number(v));
    assert_eq!(
        arith("1+2*3"),
        Binary(Add, n(1), Box::new(Binary(Mul, n(2), n(3))))
    );
    assert_eq!(
        arith("1-2-3"),
        Binary(Sub, Box::new(Binary(Sub, n(1), n(2))), n(3))
    );
    assert_eq!(
        arith("2**3**2"),
        Binary(Pow, n(2), Box::new(Binary(Pow, n(3), n(2))))
    );
    assert_eq!(
        arith("-2**2"),
        Binary(Pow, Box::new(Unary(ArithUnaryOp::Neg, n(2))), n(2))
    );
    assert!(
        matches!(arith("a ? b : c ? d : e"), Conditional(_, _, ref e) if matches!(**e, Conditional(..)))
    );
    assert!(
        matches!(arith("a = b += 2"), Assign { op: None, ref value, .. } if matches!(**value, Assign { op: Some(Add), .. }))
    );
    assert!(matches!(arith("1, 2"), Binary(Comma, _, _)));
    assert!(matches!(arith("a || b && c"), Binary(LogOr, _, _)));
    assert!(matches!(arith("a | b ^ c & d"), Binary(BitOr, _, _)));
    assert!(matches!(arith("1 << 2 < 3"), Binary(Lt, _, _)));
    assert!(matches!(arith("1 == 2 != 3"), Binary(Ne, _, _)));
}

#[test]
fn arith_assignment_operators() {
    for (op, b) in [
        ("+=", ArithBinOp::Add),
        ("-=", ArithBinOp::Sub),
        ("*=", ArithBinOp::Mul),
        ("/=", ArithBinOp::Div),
        ("%=", ArithBinOp::Rem),
        ("<<=", ArithBinOp::Shl),
        (">>=", ArithBinOp::Shr),
        ("&=", ArithBinOp::BitAnd),
        ("^=", ArithBinOp::BitXor),
        ("|=", ArithBinOp::BitOr),
    ] {
        assert!(
            matches!(arith(&format!("x {op} 1")), ArithExpr::Assign { op: Some(o), .. } if o == b),
            "{op}"
        );
    }
}

#[test]
fn arith_inc_dec_and_operands() {
    assert!(matches!(
        arith("i++"),
        ArithExpr::IncDec {
            increment: true,
            prefix: false,
            ..
        }
    ));
    assert!(matches!(
        arith("--i"),
        ArithExpr::IncDec {
            increment: false,
            prefix: true,
            ..
        }
    ));
    // bash -c 'echo $((1--1))' prints 2
    assert!(matches!(
        arith("1--1"),
        ArithExpr::Binary(ArithBinOp::Sub, _, _)
    ));
    assert_eq!(arith("0x1F"), ArithExpr::Number(31));
    assert_eq!(arith("017"), ArithExpr::Number(15));
    assert_eq!(arith("2#101"), ArithExpr::Number(5));
    assert_eq!(arith("64#_"), ArithExpr::Number(63));
    assert_eq!(arith("36#Z"), ArithExpr::Number(35));
    assert!(matches!(arith("a[i+1]"), ArithExpr::Elem(ref n, _) if n == "a"));
    assert!(
        matches!(arith("$x + ${y}"), ArithExpr::Binary(ArithBinOp::Add, ref l, _) if matches!(**l, ArithExpr::Expansion(_)))
    );
    assert!(matches!(arith(" $(echo 1) + 2 "), ArithExpr::Binary(..)));
    assert_eq!(arith(""), ArithExpr::Number(0));
    assert_eq!(arith("(((1)))"), ArithExpr::Number(1));
}

#[test]
fn arith_errors_are_deferred_with_bash_messages() {
    // bash -c 'echo $((1+))'  => bash: line 1: 1+: syntax error: operand expected (error token is "+")
    let w = word("$((1+))");
    let [WordPart::Arith(a)] = w.as_slice() else {
        panic!()
    };
    assert_eq!(
        a.expr,
        Err("1+: syntax error: operand expected (error token is \"+\")".into())
    );
    // bash -c 'echo $((1 2))'  => bash: line 1: 1 2: syntax error in expression (error token is "2")
    let w = word("$((1 2))");
    let [WordPart::Arith(a)] = w.as_slice() else {
        panic!()
    };
    assert_eq!(
        a.expr,
        Err("1 2: syntax error in expression (error token is \"2\")".into())
    );
    let w = word("$((09))");
    let [WordPart::Arith(a)] = w.as_slice() else {
        panic!()
    };
    assert!(
        a.expr
            .as_ref()
            .unwrap_err()
            .contains("value too great for base")
    );
}

#[test]
fn legacy_dollar_bracket_arith() {
    assert!(matches!(word("$[1+2]")[0], WordPart::Arith(_)));
}

#[test]
fn parse_arith_api() {
    let a = wasmsand_shell::parse_arith("x = y * 2").unwrap();
    assert!(matches!(a.expr, Ok(ArithExpr::Assign { .. })));
    assert!(wasmsand_shell::parse_arith("1 +").unwrap().expr.is_err());
}

// ----- syntax errors, checked against bash 5.2.15 -----

fn check(src: &str, line: usize, message: &str) {
    let e = err(src);
    assert_eq!((e.line, e.message.as_str()), (line, message), "{src:?}");
    assert_eq!(e.render(), format!("bash: line {line}: {message}"));
}

#[test]
fn error_unexpected_end_of_file() {
    // bash -c 'if true; then'  => bash: -c: line 2: syntax error: unexpected end of file
    check("if true; then", 2, "syntax error: unexpected end of file");
    // bash -c $'if true\n'  => line 2
    check("if true\n", 2, "syntax error: unexpected end of file");
    // bash -c $'if true\n\n'  => line 3
    check("if true\n\n", 3, "syntax error: unexpected end of file");
    // bash -c $'\n\nif true'  => line 4
    check("\n\nif true", 4, "syntax error: unexpected end of file");
    // bash -c 'case x in' / 'a |' / 'a &&' / '{ a' / 'f() ' / 'for x in' / 'while true; do'
    for src in [
        "case x in",
        "a |",
        "a &&",
        "{ a",
        "f() ",
        "for x in",
        "while true; do",
        "if",
        "( a",
    ] {
        check(src, 2, "syntax error: unexpected end of file");
    }
}

#[test]
fn error_unexpected_token() {
    // bash -c 'fi'  => bash: -c: line 1: syntax error near unexpected token `fi'
    check("fi", 1, "syntax error near unexpected token `fi'");
    // bash -c 'echo )' ; 'echo ;;' ; ';' ; 'a;;b' ; '&' ; 'a | | b' ; 'done' ; '}' ; 'then'
    check("echo )", 1, "syntax error near unexpected token `)'");
    check("echo ;;", 1, "syntax error near unexpected token `;;'");
    check(";", 1, "syntax error near unexpected token `;'");
    check("a;;b", 1, "syntax error near unexpected token `;;'");
    check("&", 1, "syntax error near unexpected token `&'");
    check("a | | b", 1, "syntax error near unexpected token `|'");
    check("done", 1, "syntax error near unexpected token `done'");
    check("}", 1, "syntax error near unexpected token `}'");
    check("then", 1, "syntax error near unexpected token `then'");
    // bash -c 'if true; then; fi' ; 'while; do :; done' ; '{ }' ; '( )' ; 'if then fi'
    check(
        "if true; then; fi",
        1,
        "syntax error near unexpected token `;'",
    );
    check(
        "while; do :; done",
        1,
        "syntax error near unexpected token `;'",
    );
    check("{ }", 1, "syntax error near unexpected token `}'");
    check("( )", 1, "syntax error near unexpected token `)'");
    check("if then fi", 1, "syntax error near unexpected token `then'");
    // bash -c 'echo > ' ; 'echo >;' ; 'function' ; 'echo <<'
    check("echo > ", 1, "syntax error near unexpected token `newline'");
    check("echo >;", 1, "syntax error near unexpected token `;'");
    check(
        "function",
        1,
        "syntax error near unexpected token `newline'",
    );
    check("echo <<", 1, "syntax error near unexpected token `newline'");
    // bash -c 'f() echo' ; 'a=(b (c))' ; 'echo a=(x)' ; 'x=1 if true; then :; fi'
    check("f() echo", 1, "syntax error near unexpected token `echo'");
    check("a=(b (c))", 1, "syntax error near unexpected token `('");
    check("echo a=(x)", 1, "syntax error near unexpected token `('");
    check(
        "x=1 if true; then :; fi",
        1,
        "syntax error near unexpected token `then'",
    );
    // bash -c $'x\n\nfi\n'  => line 3
    check("x\n\nfi\n", 3, "syntax error near unexpected token `fi'");
}

#[test]
fn error_unterminated() {
    // bash -c 'echo "abc'  => bash: -c: line 1: unexpected EOF while looking for matching `"'
    check(
        "echo \"abc",
        1,
        "unexpected EOF while looking for matching `\"'",
    );
    // bash -c $'echo "abc\ndef'  => line 1 (where the quote opened)
    check(
        "echo \"abc\ndef",
        1,
        "unexpected EOF while looking for matching `\"'",
    );
    // bash -c "echo 'abc" ; bash -c $'echo \'a\nb\nc'
    check(
        "echo 'abc",
        1,
        "unexpected EOF while looking for matching `''",
    );
    check(
        "echo 'a\nb\nc",
        1,
        "unexpected EOF while looking for matching `''",
    );
    // bash -c 'echo `ls'
    check(
        "echo `ls",
        1,
        "unexpected EOF while looking for matching ``'",
    );
    // bash -c 'echo ${a' ; 'echo ${a:-' ; $'echo ${a\nb'
    check(
        "echo ${a",
        1,
        "unexpected EOF while looking for matching `}'",
    );
    check(
        "echo ${a:-",
        1,
        "unexpected EOF while looking for matching `}'",
    );
    check(
        "echo ${a\nb",
        1,
        "unexpected EOF while looking for matching `}'",
    );
    // bash -c 'echo $(ls'  => line 2 ; bash -c $'echo $(ls\n\nx'  => line 4
    check(
        "echo $(ls",
        2,
        "unexpected EOF while looking for matching `)'",
    );
    check(
        "echo $(ls\n\nx",
        4,
        "unexpected EOF while looking for matching `)'",
    );
    // bash -c '$(case x in x) echo ;; esac'  => line 2
    check(
        "$(case x in x) echo ;; esac",
        2,
        "unexpected EOF while looking for matching `)'",
    );
    // bash -c 'for ((i=0' ; '(( 1 +' ; 'echo $((1+' ; '((' ; 'x=(a b'
    check(
        "for ((i=0",
        1,
        "unexpected EOF while looking for matching `)'",
    );
    check("(( 1 +", 1, "unexpected EOF while looking for matching `)'");
    check(
        "echo $((1+",
        1,
        "unexpected EOF while looking for matching `)'",
    );
    check("((", 1, "unexpected EOF while looking for matching `)'");
    check("x=(a b", 1, "unexpected EOF while looking for matching `)'");
}

#[test]
fn error_conditional() {
    // bash -c '[[ a'  => bash: -c: line 1: unexpected token `newline', conditional binary operator expected
    check(
        "[[ a",
        1,
        "unexpected token `newline', conditional binary operator expected",
    );
    // printf '[[ ( a ]]\n' > t.sh; bash t.sh  => t.sh: line 1: unexpected token `]]', expected `)'
    check("[[ ( a ]]", 1, "unexpected token `]]', expected `)'");
    // [[ a b ]]  => conditional binary operator expected
    check("[[ a b ]]", 1, "conditional binary operator expected");
    // [[ a == ]]  => unexpected argument `]]' to conditional binary operator
    check(
        "[[ a == ]]",
        1,
        "unexpected argument `]]' to conditional binary operator",
    );
    // [[ -f ]]  => unexpected argument `]]' to conditional unary operator
    check(
        "[[ -f ]]",
        1,
        "unexpected argument `]]' to conditional unary operator",
    );
    // [[ a ) ]]  => syntax error in conditional expression: unexpected token `)'
    check(
        "[[ a ) ]]",
        1,
        "syntax error in conditional expression: unexpected token `)'",
    );
}

#[test]
fn error_positions_have_columns() {
    let e = err("echo ok\n  echo )");
    assert_eq!((e.line, e.column), (2, 8));
}

#[test]
fn subscript_before_the_command_must_balance_as_bash_reads_it() {
    // bash reads `name[` before the command word to its balanced `]`, `$[...]` and nested
    // brackets included; the text ending first is an error even when a `]` appears.
    for src in ["a[$[]=x", "a[[]=x", "a[x", "a[x)"] {
        assert!(
            err(src).message.contains("looking for matching `]'"),
            "{src}: {:?}",
            err(src)
        );
    }
    assert_eq!(words_of(&simple("a[x]y")), ["a[x]y"]);
}

#[test]
fn backslash_ending_the_input_is_a_quoted_backslash() {
    assert_eq!(word("a$\\"), [lit("a$"), q("\\")]);
}

#[test]
fn an_assignment_word_before_parentheses_is_not_a_function_name() {
    for src in [
        "a=b() { :; }",
        "m=%() { :; }",
        "a[1]=x() { :; }",
        "a+=1() { :; }",
    ] {
        assert!(
            err(src)
                .message
                .contains("syntax error near unexpected token `('"),
            "{src}: {:?}",
            err(src)
        );
    }
    // A name with `=` is still a function name after the keyword, as in bash.
    assert!(matches!(
        first_command("function a=b { :; }"),
        Command::FunctionDef(_)
    ));
    assert!(matches!(
        first_command("=a() { :; }"),
        Command::FunctionDef(_)
    ));
}
