//! The accepted shell subset, its expansions, and one test per rejected construct, each rendered as
//! text (servers with their environment, arguments and redirections, or the located error).

use std::collections::BTreeMap;

use expect_test::{Expect, expect};

use super::*;

fn render(result: Result<Recipe, RecipeError>) -> String {
    let recipe = match result {
        Ok(recipe) => recipe,
        Err(err) => return format!("error {}:{}: {}\n", err.line, err.column, err.message),
    };
    let mut out = String::new();
    for server in &recipe.servers {
        out.push_str(&format!(
            "serve at {} background={}\n",
            server.location, server.background
        ));
        for (name, value) in &server.env {
            out.push_str(&format!(
                "  env {name}={:?} @{}\n",
                value.value, value.location
            ));
        }
        for arg in &server.args {
            out.push_str(&format!("  arg {:?} @{}\n", arg.text, arg.location));
        }
        for redirection in &server.redirections {
            out.push_str(&format!(
                "  redirect {redirection} @{}\n",
                redirection.location
            ));
        }
    }
    out
}

#[track_caller]
fn check(text: &str, expect: Expect) {
    expect.assert_eq(&render(parse_recipe(text, &RecipeOptions::default())));
}

#[track_caller]
fn check_with_env(text: &str, env: &[(&str, &str)], expect: Expect) {
    let options = RecipeOptions {
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
    };
    expect.assert_eq(&render(parse_recipe(text, &options)));
}

#[test]
fn seed_shape_with_prefix_env_continuations_and_multiline_json() {
    check(
        r#"#!/bin/bash
MODEL_PATH=${MODEL_PATH:-/path/model}
export VLLM_USE_V2_MODEL_RUNNER=1

CUDA_VISIBLE_DEVICES=0,1 uv run vllm serve "$MODEL_PATH" \
    --tensor-parallel-size 2 \
    --additional-config '{
        "afd": {"role": "attention"}
    }' \
    --trust-remote-code > attn.log 2>&1 &

wait
"#,
        expect![[r#"
            serve at 5:1 background=true
              env CUDA_VISIBLE_DEVICES="0,1" @5:1
              env VLLM_USE_V2_MODEL_RUNNER="1" @3:8
              arg "/path/model" @5:45
              arg "--tensor-parallel-size" @6:5
              arg "2" @6:28
              arg "--additional-config" @7:5
              arg "{\n        \"afd\": {\"role\": \"attention\"}\n    }" @7:26
              arg "--trust-remote-code" @10:5
              redirect 1> attn.log @10:25
              redirect 2>&1 @10:36
        "#]],
    );
}

#[test]
fn multiline_single_quoted_words_keep_each_character_position() {
    let recipe = parse_recipe(
        "vllm serve m --additional-config '{\n  \"afd\": 1\n}'\n",
        &RecipeOptions::default(),
    )
    .unwrap();
    let word = &recipe.servers[0].args[2];
    let quote = word.text.find("\"afd\"").unwrap();
    let index = word.text[..quote].chars().count();
    assert_eq!(
        word.location_of_char(index),
        Location::Text { line: 2, column: 3 }
    );
    assert_eq!(word.location_of_char(10_000), word.location);
}

#[test]
fn default_expansion_uses_the_value_when_set_and_non_empty() {
    check_with_env(
        "A=${M:-fallback}\nB=${E:-fallback}\nvllm serve \"$A\" \"$B\" ${M}x\n",
        &[("M", "/models/x"), ("E", "")],
        expect![[r#"
            serve at 3:1 background=false
              env E="" @3:1
              env M="/models/x" @3:1
              arg "/models/x" @3:13
              arg "fallback" @3:18
              arg "/models/xx" @3:22
        "#]],
    );
}

#[test]
fn unquoted_expansions_split_into_fields_and_quoted_ones_do_not() {
    check(
        "FLAGS='--enforce-eager   --port 9000'\nEMPTY=\nvllm serve m $FLAGS \"$FLAGS\" $EMPTY \"\" ${NOPE:-a 'b c'}\n",
        expect![[r#"
            serve at 3:1 background=false
              arg "m" @3:12
              arg "--enforce-eager" @3:14
              arg "--port" @3:14
              arg "9000" @3:14
              arg "--enforce-eager   --port 9000" @3:22
              arg "" @3:37
              arg "a" @3:48
              arg "b c" @3:51
        "#]],
    );
}

#[test]
fn double_quotes_expand_and_escape_but_keep_other_backslashes() {
    check(
        "P=6269\nvllm serve m --additional-config \"{\\\"port\\\": $P, \\\"x\\\": \\\"a\\\\b\\n\\\"}\"\n",
        expect![[r#"
            serve at 2:1 background=false
              arg "m" @2:12
              arg "--additional-config" @2:14
              arg "{\"port\": 6269, \"x\": \"a\\b\\n\"}" @2:35
        "#]],
    );
}

#[test]
fn adjacent_quoted_segments_form_one_word() {
    check(
        "H=10.0.0.1\nvllm serve m --additional-config '{\"host\": \"'\"${H}\"'\"}'\n",
        expect![[r#"
            serve at 2:1 background=false
              arg "m" @2:12
              arg "--additional-config" @2:14
              arg "{\"host\": \"10.0.0.1\"}" @2:35
        "#]],
    );
}

#[test]
fn only_exported_variables_reach_the_process() {
    check(
        "LOCAL=1\nexport SHARED=2\nLATER=3\nexport LATER\nexport FUTURE\nFUTURE=4\nvllm serve m\n",
        expect![[r#"
            serve at 7:1 background=false
              env FUTURE="4" @6:1
              env LATER="3" @3:1
              env SHARED="2" @2:8
              arg "m" @7:12
        "#]],
    );
}

#[test]
fn prefix_assignments_do_not_affect_the_command_own_expansions() {
    check(
        "X=old\nX=new Y=$X vllm serve $X\n",
        expect![[r#"
            serve at 2:1 background=false
              env X="new" @2:1
              env Y="old" @2:7
              arg "old" @2:23
        "#]],
    );
}

#[test]
fn set_lines_comments_and_blank_lines_are_accepted() {
    check(
        "#!/usr/bin/env bash\n# comment\n\nset -euo pipefail\nset +x -o errexit\nvllm serve m # trailing comment\n  \n",
        expect![[r#"
            serve at 6:1 background=false
              arg "m" @6:12
        "#]],
    );
}

#[test]
fn append_and_numbered_redirections_are_recorded() {
    check(
        "vllm serve m >> a.log 2> err.log 3>&2 &\n",
        expect![[r#"
            serve at 1:1 background=true
              arg "m" @1:12
              redirect 1>> a.log @1:14
              redirect 2> err.log @1:23
              redirect 3>&2 @1:34
        "#]],
    );
}

#[test]
fn a_literal_dollar_and_hash_inside_a_word_stay_literal() {
    check(
        "vllm serve m a#b $ \"x$\"\n",
        expect![[r#"
            serve at 1:1 background=false
              arg "m" @1:12
              arg "a#b" @1:14
              arg "$" @1:18
              arg "x$" @1:21
        "#]],
    );
}

#[test]
fn command_substitution_is_rejected() {
    check(
        "X=$(hostname)\n",
        expect![[r#"
            error 1:3: command substitution `$(…)` is not modelled: the parser never runs commands
        "#]],
    );
    check(
        "vllm serve `cat model`\n",
        expect![[r#"
            error 1:12: command substitution with backticks is not modelled: the parser never runs commands
        "#]],
    );
    check(
        "vllm serve \"$((1+1))\"\n",
        expect![[r#"
            error 1:13: arithmetic expansion `$((…))` is not modelled: the parser never runs commands
        "#]],
    );
}

#[test]
fn lists_pipes_and_subshells_are_rejected() {
    check(
        "vllm serve m | tee log\n",
        expect![[r#"
            error 1:14: pipes (`|`) are not modelled; a recipe runs vllm serve commands only
        "#]],
    );
    check(
        "vllm serve m || true\n",
        expect![[r#"
            error 1:14: `||` lists are not modelled; a recipe runs vllm serve commands only
        "#]],
    );
    check(
        "A=1; vllm serve m\n",
        expect![[r#"
            error 1:4: `;` command separators are not modelled; put each command on its own line
        "#]],
    );
    check(
        "vllm serve m && wait\n",
        expect![[r#"
            error 1:14: `&&` lists are not modelled; put each command on its own line
        "#]],
    );
    check(
        "(vllm serve m)\n",
        expect![[r#"
            error 1:1: `(` (subshells and functions) is not modelled
        "#]],
    );
    check(
        "vllm serve m < input\n",
        expect![[r#"
            error 1:14: input redirection `<` is not modelled
        "#]],
    );
    check(
        "vllm serve m &> log\n",
        expect![[r#"
            error 1:14: `&>` redirection is not modelled; write `> file 2>&1`
        "#]],
    );
}

#[test]
fn control_flow_and_unknown_commands_are_rejected() {
    check(
        "if [ -n \"$X\" ]\n",
        expect![[r#"
            error 1:1: `if` (conditionals, loops and tests) is not modelled; a recipe is a straight list of commands
        "#]],
    );
    check(
        "[[ -f x ]]\n",
        expect![[r#"
            error 1:1: `[[` (conditionals, loops and tests) is not modelled; a recipe is a straight list of commands
        "#]],
    );
    check(
        "mkdir -p logs\n",
        expect![[r#"
            error 1:1: unknown command `mkdir`: a recipe may only assign and export variables, `set` shell options, run `vllm serve` or `uv run vllm serve`, and `wait`
        "#]],
    );
    check(
        "python -m vllm.entrypoints.openai.api_server\n",
        expect![[r#"
            error 1:1: unknown command `python`: a recipe may only assign and export variables, `set` shell options, run `vllm serve` or `uv run vllm serve`, and `wait`
        "#]],
    );
    check(
        "vllm bench serve\n",
        expect![[r#"
            error 1:6: expected `vllm serve`, found `bench` here: only `vllm serve` and `uv run vllm serve` are modelled
        "#]],
    );
    check(
        "uv run --with x vllm serve m\n",
        expect![[r#"
            error 1:8: expected `uv run vllm serve`, found `--with` here: only `vllm serve` and `uv run vllm serve` are modelled
        "#]],
    );
    check(
        "uv run vllm\n",
        expect![[r#"
            error 1:8: expected `uv run vllm serve`, found the end of the command
        "#]],
    );
    check(
        "BIN=vllm\n$BIN serve m\n",
        expect![[r#"
            error 2:1: the command name comes from an expansion; write the command (vllm serve) out
        "#]],
    );
}

#[test]
fn expansions_outside_the_subset_are_rejected() {
    check(
        "vllm serve $1\n",
        expect![[r#"
            error 1:12: special parameter `$1` is not modelled: a recipe has no arguments, exit codes or process ids
        "#]],
    );
    check(
        "vllm serve ${#X}\n",
        expect![[r#"
            error 1:12: parameter expansion `${#…` is not modelled: only ${NAME} and ${NAME:-default} are
        "#]],
    );
    check(
        "vllm serve ${X:=y}\n",
        expect![[r#"
            error 1:12: parameter expansion operator `:` in ${X…} is not modelled: only ${X} and ${X:-default} are
        "#]],
    );
    check(
        "vllm serve ${X:-y\n",
        expect![[r#"
            error 2:1: unterminated `${…:-…}` expansion: missing `}`
        "#]],
    );
    check(
        "vllm serve $MODEL\n",
        expect![[r#"
            error 1:12: variable `MODEL` is not set here; assign it earlier, write ${MODEL:-default}, or pass it as an environment variable
        "#]],
    );
}

#[test]
fn globs_braces_and_tildes_are_rejected() {
    check(
        "vllm serve /models/*\n",
        expect![[r#"
            error 1:20: unquoted `*` would be a filename pattern (globbing is not modelled); quote the word
        "#]],
    );
    check(
        "vllm serve m --cudagraph-capture-sizes [64]\n",
        expect![[r#"
            error 1:40: unquoted `[` would be a filename pattern (globbing is not modelled); quote the word
        "#]],
    );
    check(
        "vllm serve m {a,b}\n",
        expect![[r#"
            error 1:14: unquoted `{` (brace expansion or a command group) is not modelled; quote the word
        "#]],
    );
    check(
        "vllm serve ~/model\n",
        expect![[r#"
            error 1:12: tilde expansion `~` is not modelled; write the path out or quote it
        "#]],
    );
    check(
        "P='*'\nvllm serve $P\n",
        expect![[r#"
            error 2:12: unquoted $P expands to a filename pattern (globbing is not modelled); quote it
        "#]],
    );
}

#[test]
fn unterminated_quotes_point_at_the_opening_quote() {
    check(
        "vllm serve m --additional-config '{\n  \"afd\": {}\n",
        expect![[r#"
            error 1:34: unterminated single quote: no closing `'` before the end of input
        "#]],
    );
    check(
        "vllm serve \"m\n",
        expect![[r#"
            error 1:12: unterminated double quote: no closing `"` before the end of input
        "#]],
    );
    check(
        "vllm serve m \\",
        expect![[r#"
            error 1:14: backslash at end of input
        "#]],
    );
}

#[test]
fn a_foreground_server_blocks_the_rest_of_the_script() {
    check(
        "vllm serve a\nvllm serve b &\n",
        expect![[r#"
            error 2:1: this line is never reached: the vllm serve at 1:1 runs in the foreground (no `&`) and does not return
        "#]],
    );
}

#[test]
fn builtins_reject_what_they_do_not_model() {
    check(
        "wait $PID\n",
        expect![[r#"
            error 1:6: `wait` with arguments is not modelled (process ids are not tracked); use a bare `wait`
        "#]],
    );
    check(
        "set -- a b\n",
        expect![[r#"
            error 1:5: `set` option `-` is not modelled; accepted: -e, -u, -x, -o pipefail
        "#]],
    );
    check(
        "set -o vi\n",
        expect![[r#"
            error 1:8: `set -o vi` is not modelled; accepted: pipefail, errexit, nounset, xtrace
        "#]],
    );
    check(
        "set a\n",
        expect![[r#"
            error 1:5: `set a` is not modelled: only shell options such as `set -euo pipefail` are accepted
        "#]],
    );
    check(
        "export -n X\n",
        expect![[r#"
            error 1:8: `export -n` is not modelled; use `export NAME=value`
        "#]],
    );
    check(
        "X=1 export Y=2\n",
        expect![[r#"
            error 1:1: an environment prefix before `export` is not modelled
        "#]],
    );
    check(
        "wait &\n",
        expect![[r#"
            error 1:1: running `wait` in the background is not modelled
        "#]],
    );
    check(
        "& vllm serve m\n",
        expect![[r#"
            error 1:1: `&` without a command before it
        "#]],
    );
    check(
        "A=1 > log\n",
        expect![[r#"
            error 1:5: redirection without a command
        "#]],
    );
    check(
        "vllm serve m >\n",
        expect![[r#"
            error 1:15: redirection needs a file name, found '\n'
        "#]],
    );
    check(
        "vllm serve m 2>&x\n",
        expect![[r#"
            error 1:17: `>&` must be followed by a file descriptor number (as in `2>&1`)
        "#]],
    );
}

#[test]
fn command_lines_take_prefixes_and_optional_vllm_serve() {
    let options = RecipeOptions::default();
    let with_serve =
        parse_command_line("CUDA_VISIBLE_DEVICES=0 vllm serve m --port 1", &options).unwrap();
    let bare = parse_command_line("m --port 1", &options).unwrap();
    let texts = |c: &ServeCommand| c.args.iter().map(|w| w.text.clone()).collect::<Vec<_>>();
    assert_eq!(texts(&with_serve), ["m", "--port", "1"]);
    assert_eq!(texts(&bare), ["m", "--port", "1"]);
    assert_eq!(with_serve.env["CUDA_VISIBLE_DEVICES"].value, "0");
    let empty = parse_command_line("  ", &options).unwrap();
    assert!(empty.args.is_empty());
    let err = parse_command_line("vllm serve m\nvllm serve n", &options).unwrap_err();
    assert_eq!((err.line, err.column), (2, 1));
}

#[test]
fn errors_render_with_the_source_name() {
    let err = parse_recipe("vllm serve $(x)", &RecipeOptions::default()).unwrap_err();
    assert_eq!(
        err.render("recipe.sh"),
        "recipe.sh:1:12: command substitution `$(…)` is not modelled: the parser never runs commands"
    );
}

#[test]
fn pathological_inputs_are_refused_not_exhausting() {
    let nested = format!("vllm serve {}x{}\n", "${A:-".repeat(40), "}".repeat(40));
    let err = parse_recipe(&nested, &RecipeOptions::default()).unwrap_err();
    assert!(err.message.contains("nested deeper than 32"), "{err}");
    let doubling = std::iter::once("A=xxxxxxxx\n".to_owned())
        .chain((0..40).map(|_| "A=$A$A\n".to_owned()))
        .collect::<String>();
    let err = parse_recipe(&doubling, &RecipeOptions::default()).unwrap_err();
    assert!(
        err.message.contains("longer than 1048576 characters"),
        "{err}"
    );
}
