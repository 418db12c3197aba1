//! The parser's snapshot tests (insta): each case's whole tree, or its error, as `Debug`
//! prints it, kept under `snapshots/`. A change to the parser that changes a tree fails here
//! and shows the difference; `cargo insta review` (or `INSTA_UPDATE=always`) accepts it after
//! reading. The cases are the inputs of `parser.rs`, whose tests state the properties that
//! matter (and bash's error wording) one by one.

use wasmsand_shell::parse;

/// (snapshot name, script).
const CASES: &[(&str, &str)] = &[
    ("list_separators_and_background_01", "a; b & c\nd && e || f"),
    ("newline_after_and_or_and_pipe_01", "a &&\n\n b |\n c"),
    (
        "pipeline_negation_time_and_pipe_amp_01",
        "! time -p a | b |& c",
    ),
    ("comments_only_at_word_start_01", "echo a#b # comment here"),
    ("comments_only_at_word_start_02", "# only a comment\n\n"),
    ("comments_only_at_word_start_03", "a;#c\nb"),
    ("empty_script_01", ""),
    ("empty_script_02", "  \n\t\n"),
    ("line_numbers_of_simple_commands_01", "a\n\nb \\\nc\nd"),
    ("prefix_assignments_01", "A=1 B+=2 cmd C=3"),
    ("assignment_alone_and_empty_value_01", "x= y=2"),
    (
        "array_assignments_01",
        "a=(x 'y z' [3]=w\n # comment\n v) a[1]=v a+=(z)",
    ),
    (
        "subscript_with_expansion_and_quotes_01",
        "m[\"a b\"]=1 a[$i+1]=2",
    ),
    (
        "declaration_builtins_take_assignments_01",
        "declare -A m=([k]=v [j]=w) x=$y",
    ),
    ("declaration_builtins_take_assignments_02", "echo x=1"),
    ("not_assignments_01", "cmd 1x=2"),
    ("not_assignments_02", "'a'=1"),
    ("not_assignments_03", "a[1 =2"),
    (
        "redirection_before_command_and_digits_word_01",
        ">out echo 12 a2>x",
    ),
    (
        "two_heredocs_on_one_line_01",
        "cat <<E1; cat <<'E2'\none\nE1\ntwo\nE2\necho end",
    ),
    (
        "heredoc_feeding_a_loop_and_inside_substitution_01",
        "cat <<EOF | while read l; do echo $l; done\na\nb\nEOF\n",
    ),
    (
        "heredoc_feeding_a_loop_and_inside_substitution_02",
        concat!("echo ", "\"$(cat <<X\nin sub\nX\n)\""),
    ),
    (
        "heredoc_on_compound_and_function_01",
        "while read x; do :; done <<EOF\n1\nEOF\nf() { cat; } <<E\nz\nE\n",
    ),
    ("subshell_and_group_01", "( a; b )"),
    ("subshell_and_group_02", "{ a; b; }"),
    ("subshell_and_group_03", "{ a\n}"),
    ("subshell_and_group_04", "(a)"),
    ("braces_are_words_outside_command_position_01", "echo } {"),
    ("braces_are_words_outside_command_position_02", "{a,b}"),
    (
        "if_elif_else_01",
        "if a; then b; elif c\nthen d; else e; fi",
    ),
    (
        "keywords_only_in_command_position_01",
        "echo if then fi done",
    ),
    (
        "keywords_only_in_command_position_02",
        "if if a; then b; fi; then c; fi",
    ),
    ("keywords_only_in_command_position_03", "iffy"),
    ("while_until_01", "while a; do b; done"),
    ("while_until_02", "until a\ndo\nb\ndone"),
    (
        "for_loops_01",
        "for x in a {1..2} \"c d\"; do echo $x; done",
    ),
    ("for_loops_02", "for x in; do :; done"),
    ("for_loops_03", "for x in a\ndo :; done"),
    ("for_loops_04", "for x in a; { :; }"),
    ("for_loops_05", "select x in a b; do :; done"),
    ("c_style_for_01", "for ((i=0; i<n; i++)); do :; done"),
    ("c_style_for_02", "for ((;;)) { break; }"),
    (
        "case_command_01",
        "case $x in\n a|b) one;;\n (c*) two ;&\n d) three;;&\n *) ;;\n e) last\nesac",
    ),
    ("case_command_02", "case a in esac"),
    ("case_command_03", "case a in a) echo esac;; esac"),
    (
        "case_inside_command_substitution_01",
        concat!("echo ", "$(case x in x) echo ;; esac)"),
    ),
    ("functions_01", ":(){ :|:& };:"),
    ("functions_02", "f() { :; } >/dev/null 2>&1"),
    (
        "arith_command_and_fallback_to_subshells_01",
        "(( x = 1 + 2 ))",
    ),
    (
        "arith_command_and_fallback_to_subshells_02",
        "((echo a); (echo b))",
    ),
    (
        "arith_command_and_fallback_to_subshells_03",
        concat!("echo ", "$((echo a); (echo b))"),
    ),
    ("compound_redirections_01", "{ a; } > f 2>&1"),
    ("quoting_01", concat!("echo ", "'a b'")),
    ("quoting_02", concat!("echo ", "a\\ b")),
    ("quoting_03", concat!("echo ", "\"x $y \\$ \\a\"")),
    ("quoting_04", concat!("echo ", "$\"loc\"")),
    ("quoting_05", concat!("echo ", "a\\\nb")),
    ("quoting_06", concat!("echo ", "\"a\\\nb\"")),
    ("quoting_07", concat!("echo ", "\"it's\"")),
    (
        "ansi_c_quoting_01",
        concat!("echo ", r"$'a\tb\n\x41\101\u00e9\cA\e\\\'\q'"),
    ),
    ("ansi_c_quoting_02", concat!("echo ", "\"$'x'\"")),
    ("special_parameters_01", concat!("echo ", "$10")),
    ("special_parameters_02", concat!("echo ", "$")),
    ("special_parameters_03", concat!("echo ", "a$")),
    ("special_parameters_04", concat!("echo ", "$%")),
    ("parameter_operators_01", concat!("echo ", "${x:-a b}")),
    ("parameter_operators_02", concat!("echo ", "${x-y}")),
    ("parameter_operators_03", concat!("echo ", "${x:=y}")),
    ("parameter_operators_04", concat!("echo ", "${x=y}")),
    ("parameter_operators_05", concat!("echo ", "${x:?y}")),
    ("parameter_operators_06", concat!("echo ", "${x?}")),
    ("parameter_operators_07", concat!("echo ", "${x:+y}")),
    ("parameter_operators_08", concat!("echo ", "${x+y}")),
    ("parameter_operators_09", concat!("echo ", "${#x}")),
    ("parameter_operators_10", concat!("echo ", "${#arr[@]}")),
    ("parameter_operators_11", concat!("echo ", "${x#a*}")),
    ("parameter_operators_12", concat!("echo ", "${x##a*}")),
    ("parameter_operators_13", concat!("echo ", "${x%a}")),
    ("parameter_operators_14", concat!("echo ", "${x%%a}")),
    ("parameter_operators_15", concat!("echo ", "${x/a}")),
    ("parameter_operators_16", concat!("echo ", "${x^}")),
    ("parameter_operators_17", concat!("echo ", "${x^^}")),
    ("parameter_operators_18", concat!("echo ", "${x,}")),
    ("parameter_operators_19", concat!("echo ", "${x,,[ab]}")),
    ("parameter_operators_20", concat!("echo ", "${x@Q}")),
    ("substring_01", concat!("echo ", "${x:1:2}")),
    ("substring_02", concat!("echo ", "${x: -1}")),
    ("substring_03", concat!("echo ", "${x:a?1:2:$n}")),
    ("substring_04", concat!("echo ", "${@:2}")),
    (
        "indirection_arrays_and_keys_01",
        concat!("echo ", "${!name}"),
    ),
    (
        "indirection_arrays_and_keys_02",
        concat!("echo ", "${!name:-d}"),
    ),
    (
        "indirection_arrays_and_keys_03",
        concat!("echo ", "${!pre*}"),
    ),
    (
        "indirection_arrays_and_keys_04",
        concat!("echo ", "${!pre@}"),
    ),
    (
        "indirection_arrays_and_keys_05",
        concat!("echo ", "${!arr[@]}"),
    ),
    (
        "indirection_arrays_and_keys_06",
        concat!("echo ", "${!arr[*]}"),
    ),
    (
        "indirection_arrays_and_keys_07",
        concat!("echo ", "${a[@]}"),
    ),
    (
        "indirection_arrays_and_keys_08",
        concat!("echo ", "${a[*]}"),
    ),
    (
        "indirection_arrays_and_keys_09",
        concat!("echo ", "${a[i+1]}"),
    ),
    ("indirection_arrays_and_keys_10", concat!("echo ", "${!}")),
    (
        "nested_parameter_words_01",
        concat!("echo ", "${a:-${b:-\"c}\"}}"),
    ),
    ("nested_parameter_words_02", concat!("echo ", "${a:-{x}}")),
    ("bad_substitution_is_deferred_01", concat!("echo ", "${}")),
    (
        "bad_substitution_is_deferred_02",
        concat!("echo ", "${a b}"),
    ),
    (
        "command_substitution_and_backticks_01",
        concat!("echo ", "$(echo a; echo b)"),
    ),
    (
        "command_substitution_and_backticks_02",
        concat!("echo ", "`echo \\`echo hi\\``"),
    ),
    (
        "command_substitution_and_backticks_03",
        concat!("echo ", "$( )"),
    ),
    (
        "command_substitution_and_backticks_04",
        concat!("echo ", "<(ls)"),
    ),
    (
        "command_substitution_and_backticks_05",
        concat!("echo ", ">(cat)"),
    ),
    ("tilde_01", concat!("echo ", "~")),
    ("tilde_02", concat!("echo ", "~/x")),
    ("tilde_03", concat!("echo ", "~bob/x")),
    ("tilde_04", concat!("echo ", "a~")),
    ("tilde_05", concat!("echo ", "'~'")),
    ("tilde_06", "P=~/a:~b/c"),
    ("brace_expansion_01", concat!("echo ", "a{b,c}d")),
    ("brace_expansion_02", concat!("echo ", "{1..10..2}")),
    ("brace_expansion_03", concat!("echo ", "{a..e}")),
    ("brace_expansion_04", concat!("echo ", "{a,b{c,d}}")),
    ("brace_expansion_05", concat!("echo ", "{x}")),
    ("brace_expansion_06", concat!("echo ", "{a..1}")),
    ("brace_expansion_07", concat!("echo ", "{,}")),
    ("brace_expansion_08", concat!("echo ", "'{a,b}'")),
    ("brace_expansion_09", concat!("echo ", "{a\\,b}")),
    ("brace_expansion_10", concat!("echo ", "{$x,b}")),
    ("brace_expansion_11", concat!("echo ", "{a,{b,c}")),
    ("brace_expansion_12", "x={a,b}"),
    (
        "glob_characters_stay_unquoted_literals_01",
        concat!("echo ", "*.t?t[ab]"),
    ),
    (
        "glob_characters_stay_unquoted_literals_02",
        concat!("echo ", "\"*\"\\?"),
    ),
    (
        "arith_precedence_and_associativity_01",
        concat!("echo $((", "1+2*3", "))"),
    ),
    (
        "arith_precedence_and_associativity_02",
        concat!("echo $((", "1-2-3", "))"),
    ),
    (
        "arith_precedence_and_associativity_03",
        concat!("echo $((", "2**3**2", "))"),
    ),
    (
        "arith_precedence_and_associativity_04",
        concat!("echo $((", "-2**2", "))"),
    ),
    (
        "arith_precedence_and_associativity_05",
        concat!("echo $((", "a ? b : c ? d : e", "))"),
    ),
    (
        "arith_precedence_and_associativity_06",
        concat!("echo $((", "a = b += 2", "))"),
    ),
    (
        "arith_precedence_and_associativity_07",
        concat!("echo $((", "1, 2", "))"),
    ),
    (
        "arith_precedence_and_associativity_08",
        concat!("echo $((", "a || b && c", "))"),
    ),
    (
        "arith_precedence_and_associativity_09",
        concat!("echo $((", "a | b ^ c & d", "))"),
    ),
    (
        "arith_precedence_and_associativity_10",
        concat!("echo $((", "1 << 2 < 3", "))"),
    ),
    (
        "arith_precedence_and_associativity_11",
        concat!("echo $((", "1 == 2 != 3", "))"),
    ),
    (
        "arith_inc_dec_and_operands_01",
        concat!("echo $((", "i++", "))"),
    ),
    (
        "arith_inc_dec_and_operands_02",
        concat!("echo $((", "--i", "))"),
    ),
    (
        "arith_inc_dec_and_operands_03",
        concat!("echo $((", "1--1", "))"),
    ),
    (
        "arith_inc_dec_and_operands_04",
        concat!("echo $((", "0x1F", "))"),
    ),
    (
        "arith_inc_dec_and_operands_05",
        concat!("echo $((", "017", "))"),
    ),
    (
        "arith_inc_dec_and_operands_06",
        concat!("echo $((", "2#101", "))"),
    ),
    (
        "arith_inc_dec_and_operands_07",
        concat!("echo $((", "64#_", "))"),
    ),
    (
        "arith_inc_dec_and_operands_08",
        concat!("echo $((", "36#Z", "))"),
    ),
    (
        "arith_inc_dec_and_operands_09",
        concat!("echo $((", "a[i+1]", "))"),
    ),
    (
        "arith_inc_dec_and_operands_10",
        concat!("echo $((", "$x + ${y}", "))"),
    ),
    (
        "arith_inc_dec_and_operands_11",
        concat!("echo $((", " $(echo 1) + 2 ", "))"),
    ),
    (
        "arith_inc_dec_and_operands_12",
        concat!("echo $((", "", "))"),
    ),
    (
        "arith_inc_dec_and_operands_13",
        concat!("echo $((", "(((1)))", "))"),
    ),
    (
        "arith_errors_are_deferred_with_bash_messages_01",
        concat!("echo ", "$((1+))"),
    ),
    (
        "arith_errors_are_deferred_with_bash_messages_02",
        concat!("echo ", "$((1 2))"),
    ),
    (
        "arith_errors_are_deferred_with_bash_messages_03",
        concat!("echo ", "$((09))"),
    ),
    ("legacy_dollar_bracket_arith_01", concat!("echo ", "$[1+2]")),
    ("error_positions_have_columns_01", "echo ok\n  echo )"),
];

#[test]
fn every_case_parses_to_its_snapshot() {
    let mut names = std::collections::HashSet::new();
    for (name, src) in CASES {
        assert!(names.insert(name), "{name} twice");
        insta::with_settings!({ snapshot_suffix => *name, description => *src, omit_expression => true }, {
            insta::assert_debug_snapshot!("parse", parse(src));
        });
    }
}
