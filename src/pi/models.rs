//! What Pi 1.6 says about its models: `pi --list-models` prints the models whose provider has
//! credentials (models.json keys, auth.json, a provider key in the environment), one table:
//! `provider  model  context  max-out  thinking  images`. Pi offers no other way to ask whether
//! a model has credentials (RPC's `get_available_models` answers the same list from a running
//! session), so contract B's model selection reads this.

/// A model Pi can use: provider, id, whether it reasons (`thinking` yes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownModel {
    pub provider: String,
    pub id: String,
    pub reasoning: bool,
}

impl KnownModel {
    /// `provider/id`.
    pub fn reference(&self) -> String {
        format!("{}/{}", self.provider, self.id)
    }
}

/// The models of `pi --list-models`' output (none when it says none are available).
pub fn parse_list_models(stdout: &str) -> Vec<KnownModel> {
    let mut lines = stdout.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let cols: Vec<&str> = header.split_whitespace().collect();
    let (Some(p), Some(m), Some(t)) = (
        cols.iter().position(|c| *c == "provider"),
        cols.iter().position(|c| *c == "model"),
        cols.iter().position(|c| *c == "thinking"),
    ) else {
        return Vec::new();
    };
    lines
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some(KnownModel {
                provider: f.get(p)?.to_string(),
                id: f.get(m)?.to_string(),
                reasoning: *f.get(t)? == "yes",
            })
        })
        .collect()
}

/// The model a Pi argv names (`--provider P --model ID`, `--model P/ID`, `--model ID`, each
/// with an optional `:thinking` suffix) as `provider/id` when the provider is known, and the
/// thinking level it names (`--thinking`, else the suffix).
pub fn model_of_args(args: &[String]) -> (Option<String>, Option<String>) {
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let provider = value("--provider");
    let mut thinking = value("--thinking");
    let model = value("--model").and_then(|m| {
        let (m, suffix) = match m.rsplit_once(':') {
            Some((head, level)) if crate::pi::flags::THINKING_LEVELS.contains(&level) => {
                (head.to_string(), Some(level.to_string()))
            }
            _ => (m, None),
        };
        if thinking.is_none() {
            thinking = suffix;
        }
        match (&provider, m.contains('/')) {
            (_, true) => Some(m),
            (Some(p), false) => Some(format!("{p}/{m}")),
            (None, false) => None,
        }
    });
    (model, thinking)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_models_table_is_read_by_its_header() {
        let out = "provider  model       context  max-out  thinking  images\nfake      fake-model  128K     16.4K    no        no    \nfake      fake-think  128K     16.4K    yes       no    \n";
        assert_eq!(
            parse_list_models(out),
            vec![
                KnownModel {
                    provider: "fake".into(),
                    id: "fake-model".into(),
                    reasoning: false
                },
                KnownModel {
                    provider: "fake".into(),
                    id: "fake-think".into(),
                    reasoning: true
                },
            ]
        );
        assert!(parse_list_models("No models available. Use /login …\n").is_empty());
    }

    #[test]
    fn an_argv_names_its_model() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            model_of_args(&v(&["--provider", "fake", "--model", "m"])),
            (Some("fake/m".into()), None)
        );
        assert_eq!(
            model_of_args(&v(&["--model", "fake/m:high"])),
            (Some("fake/m".into()), Some("high".into()))
        );
        assert_eq!(
            model_of_args(&v(&["--model", "m", "--thinking", "low"])),
            (None, Some("low".into()))
        );
    }
}
