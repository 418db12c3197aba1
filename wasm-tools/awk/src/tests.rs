//! End-to-end checks of awk programs; expected outputs were produced by gawk 5.2.1.

use crate::tests_support::run;

#[test]
fn field_sum() {
    let (out, status) = run(&["{s+=$1} END{print s}"], b"1\n2\n3\n");
    assert_eq!(out, b"6\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn concat_minus() {
    let (out, status) = run(
        &["BEGIN{print 1 \" \" -1; a=5; print a \" \" -1 \" \" a}"],
        b"",
    );
    assert_eq!(out, b"1-1\n5-1 5\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn number_output() {
    let (out, status) = run(
        &["BEGIN{print 2^53+1, 1e30, -0, 0.1+0.2, 100000 * 100000, 1e300*1e300, log(-1)}"],
        b"",
    );
    assert_eq!(
        out,
        b"9007199254740992 1000000000000000019884624838656 0 0.3 10000000000 +inf -nan\n".to_vec()
    );
    assert_eq!(status, 0);
}

#[test]
fn string_to_number() {
    let (out, status) = run(
        &["BEGIN{print \"+inf\"+0, \"inf\"+0, \"0x1A\"+0, \" +5\"+0, \".5e3\"+0, \"1e\"+0}"],
        b"",
    );
    assert_eq!(out, b"+inf 0 0 5 500 1\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn strnum_compare() {
    let (out, status) = run(
        &["{print ($1 < $2), ($1 == 10)}"],
        b"10 9\nabc abd\n10.0 x\n",
    );
    assert_eq!(out, b"0 1\n1 0\n1 1\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn const_string_compare() {
    let (out, status) = run(&["BEGIN{x = \"10\"; y = 9; print (x < y), (x+0 < y)}"], b"");
    assert_eq!(out, b"1 0\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn uninit() {
    let (out, status) = run(&["BEGIN{print (x == 0), (x == \"\"), length(x)}"], b"");
    assert_eq!(out, b"1 1 0\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn missing_field_is_string() {
    let (out, status) = run(&["$2 != 0"], b"a\nb 0\nc 1\n");
    assert_eq!(out, b"a\nc 1\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn field_assign_rebuild() {
    let (out, status) = run(
        &["BEGIN{OFS=\"-\"} {$2=\"X\"; print; $5=\"E\"; print; print NF}"],
        b"a b c\n",
    );
    assert_eq!(out, b"a-X-c\na-X-c--E\n5\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn nf_assign() {
    let (out, status) = run(&["{NF=2; print; NF=4; print}"], b"a b c d\n");
    assert_eq!(out, b"a b\na b  \n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn fs_change_applies_next_record() {
    let (out, status) = run(&["{FS=\":\"; print $1}"], b"a:b c:d\ne:f g:h\n");
    assert_eq!(out, b"a:b\ne\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn getline_forms() {
    let (out, status) = run(
        &["NR==1{getline; print \"a:\" $0; getline x; print \"b:\" x, NR, FNR}"],
        b"1\n2\n3\n4\n",
    );
    assert_eq!(out, b"a:2\nb:3 3 3\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn next_exit_end() {
    let (out, status) = run(
        &["NR==2{next} {print} NR==3{exit 3} END{print \"end\"}"],
        b"1\n2\n3\n4\n",
    );
    assert_eq!(out, b"1\n3\nend\n".to_vec());
    assert_eq!(status, 3);
}

#[test]
fn functions() {
    let (out, status) = run(
        &[
            "function f(a,b){a[1]=b; b=7} function fact(n){return n<=1?1:n*fact(n-1)} BEGIN{y=2; f(arr, y); print arr[1], y, fact(10)}",
        ],
        b"",
    );
    assert_eq!(out, b"2 2 3628800\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn untyped_param_becomes_array() {
    let (out, status) = run(
        &["function h(a) { a[\"k\"] = 1 } BEGIN { h(z); print length(z), z[\"k\"] }"],
        b"",
    );
    assert_eq!(out, b"1 1\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn delete_and_in() {
    let (out, status) = run(
        &[
            "BEGIN{a[\"x\"]=1; a[1,2]=3; delete a[\"x\"]; print (\"x\" in a), ((1,2) in a), length(a); delete a; print length(a)}",
        ],
        b"",
    );
    assert_eq!(out, b"0 1 1\n0\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn printf_conversions() {
    let (out, status) = run(
        &[
            "BEGIN{printf \"%-5s|%5d|%8.3f|%x|%X|%o|%e|%E|%g|%G|%c|%c|%%|%5.1s|%+d|% d|%05d|%.3d\\n\", \"ab\", 42, 3.14159, 255, 255, 8, 1234.5, 0.000123, 1e10, 1e-10, 65, \"hello\", \"xyz\", 5, 5, -5, 7}",
        ],
        b"",
    );
    assert_eq!(out, b"ab   |   42|   3.142|ff|FF|10|1.234500e+03|1.230000E-04|1e+10|1E-10|A|h|%|    x|+5| 5|-0005|007\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn printf_star_and_big() {
    let (out, status) = run(
        &["BEGIN{printf \"%*d|%-*d|%.*f|%d|%u\\n\", 5, 42, 4, 7, 2, 3.14159, 2^53, -1}"],
        b"",
    );
    assert_eq!(
        out,
        b"   42|7   |3.14|9007199254740992|18446744073709551615\n".to_vec()
    );
    assert_eq!(status, 0);
}

#[test]
fn printf_c_nul() {
    let (out, status) = run(&["BEGIN{printf \"a%cb\", 0}"], b"");
    assert_eq!(out, b"a\x00b".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn substr_rules() {
    let (out, status) = run(
        &[
            "BEGIN{print substr(\"hello\",0,2) \"|\" substr(\"hello\",-1,3) \"|\" substr(\"hello\",1.5,2.3) \"|\" substr(\"hello\",2) \"|\" substr(\"hello\",10) \"|\" substr(\"hello\",2,-1) \"|\"}",
        ],
        b"",
    );
    assert_eq!(out, b"he|hel|he|ello|||\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn utf8_chars() {
    let (out, status) = run(
        &[
            "BEGIN{print substr(\"héllo\",2,2), length(\"héllo\"), index(\"héllo\",\"l\"), toupper(\"é\")}",
        ],
        b"",
    );
    assert_eq!(out, b"\xc3\xa9l 5 3 \xc3\x89\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn split_variants() {
    let (out, status) = run(
        &[
            "BEGIN{print split(\"a:b::c\", a, \":\"), a[3] \"|\" a[4]; print split(\"  a  b  \", q), q[1]; print split(\"abc\", r, \"\"), r[3]; print split(\"a1b22c\", s, /[0-9]+/), s[3]; n=split(\"a:b\", t, \":\", seps); print n, seps[1]}",
        ],
        b"",
    );
    assert_eq!(out, b"4 |c\n2 a\n3 c\n3 c\n2 :\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn sub_gsub_ampersand() {
    let (out, status) = run(
        &[
            "BEGIN{s=\"aaa\"; n=gsub(/a/,\"\\\\&\",s); print n, s; s=\"aaa\"; gsub(/a/,\"\\&\",s); print s; s=\"abc\"; gsub(/b/,\"[\\\\\\&]\",s); print s; s=\"abc\"; gsub(\"\", \"-\", s); print s; s=\"hello\"; gsub(/l*/,\"X\",s); print s; s=\"foo\"; sub(/o/, \"<&>\", s); print s}",
        ],
        b"",
    );
    assert_eq!(
        out,
        b"3 &&&\naaa\na[&]c\n-a-b-c-\nXhXeXoX\nf<o>o\n".to_vec()
    );
    assert_eq!(status, 0);
}

#[test]
fn gensub() {
    let (out, status) = run(
        &[
            "BEGIN{print gensub(/(a+)(b+)/, \"<\\\\2\\\\1>\", \"g\", \"aabbxab\"); print gensub(/o/, \"0\", 2, \"foo boo\"); s=\"\\\\0\"; print gensub(\"a\", s, \"g\", \"a|a\")}",
        ],
        b"",
    );
    assert_eq!(out, b"<bbaa>x<ba>\nfo0 boo\na|a\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn match_longest() {
    let (out, status) = run(
        &[
            "BEGIN{print match(\"xab\", /a|ab/), RLENGTH; print match(\"aabab\", /a*(ab)*/), RLENGTH; s=\"abcabc\"; gsub(/b|bc/, \"X\", s); print s; match(\"foo123bar\", /([a-z]+)([0-9]+)/, m); print m[1], m[2], m[2, \"start\"], m[2, \"length\"]}",
        ],
        b"",
    );
    assert_eq!(out, b"2 2\n1 5\naXaX\nfoo 123 4 3\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn regex_syntax() {
    let (out, status) = run(
        &[
            "{print ($0 ~ /^[]a]+$/), ($0 ~ /a{2}/), ($0 ~ /[[:digit:]]/), ($0 ~ \"\\\\.\"), ($0 ~ /\\<fo/)}",
        ],
        b"]a]\naa\nfoo.1\n",
    );
    assert_eq!(out, b"1 0 0 0 0\n1 1 0 0 0\n0 0 1 1 1\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn dynamic_regex_brace_literal() {
    let (out, status) = run(&["gsub(\"@(samp|code|file){\",\"\")"], b"x @code{y}\n");
    assert_eq!(out, b"x y}\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn range_pattern() {
    let (out, status) = run(&["/b/,/d/"], b"a\nb\nc\nd\ne\nb\n");
    assert_eq!(out, b"b\nc\nd\nb\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn uniq_by_key() {
    let (out, status) = run(&["!seen[$1]++"], b"a 1\nb 2\na 3\n");
    assert_eq!(out, b"a 1\nb 2\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn paragraph_mode() {
    let (out, status) = run(
        &["BEGIN{RS=\"\"} {print NR\": \"$1\"|\"NF\"|\"$NF}"],
        b"a b\nc\n\n\nd e\nf\n\n",
    );
    assert_eq!(out, b"1: a|3|c\n2: d|3|f\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn regex_rs() {
    let (out, status) = run(&["BEGIN{RS=\"[0-9]+\"} {print NR, $0, RT}"], b"a1b22c333d");
    assert_eq!(out, b"1 a 1\n2 b 22\n3 c 333\n4 d \n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn ignorecase() {
    let (out, status) = run(
        &["BEGIN{IGNORECASE=1} /abc/ {n++} END{print n, (\"ABC\" == \"abc\")}"],
        b"ABC\nabc\nxyz\n",
    );
    assert_eq!(out, b"2 1\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn sorted_in() {
    let (out, status) = run(
        &[
            "BEGIN{PROCINFO[\"sorted_in\"]=\"@ind_num_asc\"; a[10]; a[9]; a[100]; for(k in a) printf \"%s \", k; PROCINFO[\"sorted_in\"]=\"@val_str_desc\"; b[\"x\"]=\"b\"; b[\"y\"]=\"c\"; b[\"z\"]=\"a\"; for (k in b) printf \"%s \", k; print \"\"}",
        ],
        b"",
    );
    assert_eq!(out, b"9 10 100 y x z \n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn asort_asorti() {
    let (out, status) = run(
        &[
            "BEGIN{a[1]=\"c\"; a[2]=\"a\"; a[3]=\"b\"; n=asort(a); print n, a[1] a[2] a[3]; c[\"z\"]; c[\"x\"]; asorti(c, d); print d[1], d[2]}",
        ],
        b"",
    );
    assert_eq!(out, b"3 abc\nx z\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn bitwise() {
    let (out, status) = run(
        &[
            "BEGIN{print and(12, 10), or(4294967295,1), xor(12, 10), lshift(1, 4), rshift(256, 2), compl(0)}",
        ],
        b"",
    );
    assert_eq!(out, b"8 4294967295 6 16 64 9007199254740991\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn math() {
    let (out, status) = run(
        &[
            "BEGIN{print int(3.9), int(-3.9), sqrt(16), exp(0), log(1), atan2(0, -1), 7%3, -7%3, 2^3^2, -2^2}",
        ],
        b"",
    );
    assert_eq!(out, b"3 -3 4 1 0 3.14159 1 -1 512 -4\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn convfmt_ofmt() {
    let (out, status) = run(
        &[
            "BEGIN{CONVFMT=\"%.2f\"; a=3.14159; b=a \"\"; print b; x[a]=1; for(k in x) print k; OFMT=\"%.1f\"; print a, a \"\"; print 17 \"\"}",
        ],
        b"",
    );
    assert_eq!(out, b"3.14\n3.14\n3.1 3.14\n17\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn length_forms() {
    let (out, status) = run(
        &[
            "{print length; print length(); print length(\"qwe\"); print length(99+9); print length, 1; print length 1}",
        ],
        b"qwe\n",
    );
    assert_eq!(out, b"3\n3\n3\n3\n3 1\n31\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn uninit_var_args() {
    let (out, status) = run(&["BEGIN{print ARGC, ARGV[1], x}", "x=3"], b"");
    assert_eq!(out, b"2 x=3 \n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn assignment_operands() {
    let (out, status) = run(&["{print x, $0}", "x=1", "-"], b"in\n");
    assert_eq!(out, b"1 in\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn hex_octal_source() {
    let (out, status) = run(&["BEGIN{print or(0xffffffff,1), or(01234,1), 011}"], b"");
    assert_eq!(out, b"4294967295 669 9\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn input_never_octal() {
    let (out, status) = run(&["{print $1, $1+1}"], b"011\n0x10\n");
    assert_eq!(out, b"011 12\n0x10 1\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn ternary_assign_precedence() {
    let (out, status) = run(
        &["BEGIN { a=0?\"bug\":\"ok\"; print a; u=0?v=4:w=5; print u, v, w}"],
        b"",
    );
    assert_eq!(out, b"ok\n5  5\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn increment_forms() {
    let (out, status) = run(
        &["BEGIN{i=5; print i++ + ++i, i; $0=\"3 4\"; $1++; print; print -x, !x, x++ + 0}"],
        b"",
    );
    assert_eq!(out, b"12 7\n4 4\n0 1 0\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn in_operator_precedence() {
    let (out, status) = run(&["BEGIN{a[\"x\"]; print \"x\" in a, !(\"y\" in a)}"], b"");
    assert_eq!(out, b"1 1\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn print_grouping() {
    let (out, status) = run(
        &["BEGIN{print(1,2); print (1)(2); print 1>2 ? \"a\" : \"b\"}"],
        b"",
    );
    assert_eq!(out, b"".to_vec());
    assert_eq!(status, 1);
}

#[test]
fn do_while_switch() {
    let (out, status) = run(
        &[
            "BEGIN{do {j++} while (j<5); print j; switch(2){case 1: print \"one\"; break; case 2: print \"two\"; case 3: print \"three\"; break; default: print \"def\"}}",
        ],
        b"",
    );
    assert_eq!(out, b"5\ntwo\nthree\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn nextfile_and_filename() {
    let (out, status) = run(&["FNR==1{print FILENAME} {nextfile}", "-"], b"a\nb\n");
    assert_eq!(out, b"-\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn division_by_zero() {
    let (out, status) = run(&["BEGIN{y=0; print \"before\"; x=1/y}"], b"");
    assert_eq!(out, b"before\n".to_vec());
    assert_eq!(status, 2);
}

#[test]
fn division_by_zero_const() {
    let (out, status) = run(&["BEGIN{x=1/0}"], b"");
    assert_eq!(out, b"".to_vec());
    assert_eq!(status, 1);
}

#[test]
fn scalar_as_array() {
    let (out, status) = run(&["BEGIN{x=1; x[1]=2}"], b"");
    assert_eq!(out, b"".to_vec());
    assert_eq!(status, 2);
}

#[test]
fn undefined_function() {
    let (out, status) = run(&["BEGIN{f()}"], b"");
    assert_eq!(out, b"".to_vec());
    assert_eq!(status, 2);
}

#[test]
fn syntax_error() {
    let (out, status) = run(&["BEGIN { print 1 +* 2 }"], b"");
    assert_eq!(out, b"".to_vec());
    assert_eq!(status, 1);
}

#[test]
fn unexpected_newline() {
    let (out, status) = run(&["{print $1"], b"");
    assert_eq!(out, b"".to_vec());
    assert_eq!(status, 1);
}

#[test]
fn not_enough_printf_args() {
    let (out, status) = run(&["BEGIN{printf \"%d %s\\n\", 1}"], b"");
    assert_eq!(out, b"".to_vec());
    assert_eq!(status, 2);
}

#[test]
fn break_outside_loop() {
    let (out, status) = run(&["BEGIN { if (1) break }"], b"");
    assert_eq!(out, b"".to_vec());
    assert_eq!(status, 1);
}

#[test]
fn exit_code_propagates() {
    let (out, status) = run(&["BEGIN { exit 42 } END { exit }"], b"");
    assert_eq!(out, b"".to_vec());
    assert_eq!(status, 42);
}

#[test]
fn invalid_utf8_roundtrip() {
    let (out, status) = run(
        &["{print length($0); print; print toupper($0)}"],
        b"a\xffb\xfe\n",
    );
    assert_eq!(out, b"4\na\xffb\xfe\nA\xef\xbf\xbdB\xef\xbf\xbd\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn more_args_than_declared() {
    let (out, status) = run(
        &["func f(){print\"F\"};func g(){print\"G\"};BEGIN{f(g(),g())}"],
        b"",
    );
    assert_eq!(out, b"G\nG\nF\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn empty_print_parens() {
    let (out, status) = run(&["BEGIN {print()}"], b"");
    assert_eq!(out, b"".to_vec());
    assert_eq!(status, 1);
}

#[test]
fn negative_field() {
    let (out, status) = run(&["{ $(-1) }"], b"x\n");
    assert_eq!(out, b"".to_vec());
    assert_eq!(status, 2);
}

#[test]
fn fieldwidths() {
    let (out, status) = run(
        &["BEGIN{FIELDWIDTHS=\"2 3 1\"} {print $1 \"|\" $2 \"|\" $3}"],
        b"abcdefgh\n",
    );
    assert_eq!(out, b"ab|cde|f\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn fpat() {
    let (out, status) = run(
        &["BEGIN{FPAT=\"([^,]+)|(\\\"[^\\\"]+\\\")\"} {print NF, $2}"],
        b"a,\"b,c\",d\n",
    );
    assert_eq!(out, b"3 \"b,c\"\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn typeof_kinds() {
    let (out, status) = run(
        &["BEGIN{print typeof(x), typeof(1), typeof(\"s\"), typeof(a[1])} {print typeof($1)}"],
        b"12\n",
    );
    assert_eq!(out, b"untyped number string untyped\nstrnum\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn string_escapes() {
    let (out, status) = run(
        &["BEGIN{print \"\\x41\\101\\/\\\"\", \"a\\tb\", length(\"\\n\")}"],
        b"",
    );
    assert_eq!(out, b"AA/\" a\tb 1\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn strftime_utc() {
    let (out, status) = run(
        &["BEGIN{print strftime(\"%Y-%m-%d %H:%M:%S\", 86400*365, 1)}"],
        b"",
    );
    assert_eq!(out, b"1971-01-01 00:00:00\n".to_vec());
    assert_eq!(status, 0);
}

#[test]
fn srand_returns_previous() {
    let (out, status) = run(&["BEGIN{srand(5); print srand(7), srand()}"], b"");
    assert_eq!(out, b"5 7\n".to_vec());
    assert_eq!(status, 0);
}
