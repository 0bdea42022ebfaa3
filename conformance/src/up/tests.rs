//! Tests of the recipe rewriting `up` does before it starts twins.

use super::*;

fn words(text: &str) -> Vec<String> {
    text.split(' ').map(str::to_owned).collect()
}

#[test]
fn flag_values_take_the_last_spelling() {
    let args = words("m --port 1 --host h --port=2");
    assert_eq!(flag_value(&args, "--port"), Some("2"));
    assert_eq!(flag_value(&args, "--host"), Some("h"));
    assert_eq!(flag_value(&args, "--missing"), None);
}

#[test]
fn rewriting_touches_both_spellings() {
    let mut args = words("m --port 1 --x 1 --port=1");
    rewrite_flag(&mut args, "--port", &|old| Some(format!("{old}0")));
    assert_eq!(args, words("m --port 10 --x 1 --port=10"));
}

#[test]
fn the_afd_port_is_set_under_its_alias() {
    assert_eq!(
        set_afd_port(r#"{ "afd": { "role": "ffn", "port": 6269 } }"#, 7000).as_deref(),
        Some(r#"{"afd":{"port":7000,"role":"ffn"}}"#)
    );
    assert_eq!(
        set_afd_port(r#"{"afd":{"afd_port":1}}"#, 7000).as_deref(),
        Some(r#"{"afd":{"afd_port":7000}}"#)
    );
    assert_eq!(set_afd_port("not json", 7000), None);
}

#[test]
fn moved_ports_keep_a_shared_port_shared() {
    let config = r#"{"afd":{"port":6269}}"#;
    let mut pair = [
        ServeWords {
            args: vec![
                "m".into(),
                "--port".into(),
                "18305".into(),
                "--additional-config".into(),
                config.into(),
            ],
            env: BTreeMap::new(),
        },
        ServeWords {
            args: vec![
                "m".into(),
                "--port=18305".into(),
                format!("--additional-config={config}"),
            ],
            env: BTreeMap::new(),
        },
    ];
    move_ports(&mut pair).expect("free ports on loopback");
    let a = flag_value(&pair[0].args, "--port").expect("port");
    let f = flag_value(&pair[1].args, "--port").expect("port");
    assert_eq!(a, f);
    assert_ne!(a, "18305");
    let afd = |w: &ServeWords| {
        flag_value(&w.args, "--additional-config")
            .expect("config")
            .to_owned()
    };
    assert_eq!(afd(&pair[0]), afd(&pair[1]));
    assert!(!afd(&pair[0]).contains("6269"));
}

#[test]
fn urls_default_to_loopback() {
    assert_eq!(
        url_of(&words("m --host 0.0.0.0 --port 9")).expect("url"),
        "http://127.0.0.1:9"
    );
    assert_eq!(url_of(&words("m")).expect("url"), "http://127.0.0.1:8000");
}

#[test]
fn the_rewritten_recipe_reads_back_as_the_words_the_twins_got() {
    let attention = ServeWords {
        args: vec![
            "/models/DeepSeek-V2-Lite".to_owned(),
            "--additional-config".to_owned(),
            r#"{"afd":{"role":"attention","port":7001,"note":"it's"}}"#.to_owned(),
            "--port".to_owned(),
            "18400".to_owned(),
        ],
        env: BTreeMap::from([("CUDA_VISIBLE_DEVICES".to_owned(), "0,1".to_owned())]),
    };
    let ffn = ServeWords {
        args: vec![
            "/models/x y".to_owned(),
            "--port".to_owned(),
            "18401".to_owned(),
        ],
        env: BTreeMap::new(),
    };
    let text = rewritten_recipe(
        "r.sh",
        (&attention, Path::new("/tmp/pair/attn.log")),
        (&ffn, Path::new("/tmp/pair 2/ffn.log")),
    );
    let recipe = parse_recipe(&text, &RecipeOptions::default()).expect("the recipe reads back");
    let read: Vec<ServeWords> = recipe
        .servers
        .iter()
        .map(|server| ServeWords {
            args: server.args.iter().map(|w| w.text.clone()).collect(),
            env: server
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.value.clone()))
                .collect(),
        })
        .collect();
    assert_eq!(read, vec![attention, ffn]);
    assert!(recipe.servers.iter().all(|s| s.background));
}
