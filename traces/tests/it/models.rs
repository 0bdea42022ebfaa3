//! The model configs shipped under `traces/data/models/` are the copies `SOURCE.md` describes, and
//! every one is reachable through `builtin_model`.

use std::path::Path;

use afd_traces::model_config::{BUILTIN_MODEL_NAMES, ModelConfig, builtin_model};

#[test]
fn shipped_configs_keep_their_documented_sizes_and_are_all_builtin() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/models");
    let source = std::fs::read_to_string(dir.join("SOURCE.md")).unwrap();
    for (file, size) in [
        ("deepseek-v2-lite/config_16B.json", 418),
        ("deepseek-r1-0528/config.json", 1_660),
        ("qwen3-30b-a3b/config.json", 964),
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        assert_eq!(text.len(), size, "{file}");
        assert!(
            source.contains(&format!("`{file}`")),
            "{file} not in SOURCE.md"
        );
        assert!(
            BUILTIN_MODEL_NAMES
                .iter()
                .any(|name| builtin_model(name) == Some(text.as_str())),
            "{file} is not served by builtin_model"
        );
        ModelConfig::from_json(&text).unwrap_or_else(|err| panic!("{file}: {err}"));
    }
    let shipped = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().path().is_dir())
        .count();
    assert_eq!(shipped, 3, "a model folder was added without a test above");
}
