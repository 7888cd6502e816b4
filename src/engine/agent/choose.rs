//! What a child runs with (0.19): for a type defined in `threadbase-agents.json`, its model
//! (`modelSelection` over the type's list, the models that have credentials as `pi
//! --list-models` lists them and the main session's scope), its thinking level (clamped to
//! what the model supports) and its tools (`toolFiltering`); for any other type, the parent's
//! model as its row or argv names it, and the thinking level as 0.19 resolves it (the
//! parent's, else the main session's, else `off`, clamped likewise), the flags left as
//! inherited but `--thinking`. The choice is made at spawn and recorded on the thread's row;
//! every run of a defined type is launched from the row, with Pi's own flags
//! (`--provider`/`--model`, `--thinking`, `--tools`/`--exclude-tools`/`--no-tools`) instead of
//! the inherited ones, and every run of another type with the row's `--thinking`; every child
//! gets `--extension` for each `requiredChildExtensions` entry.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::Agents;
use crate::contract::agent_settings::{
    self as settings, AgentType, KnownModel, ModelContext, ModelSelection,
};
use crate::error::{Error, ErrorCode, Result};
use crate::store::agents::AgentRow;

/// A child's model, thinking level and tool set (JSON), as recorded on its row.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Choice {
    pub model: Option<String>,
    pub thinking: Option<String>,
    pub tools: Option<String>,
}

/// Flags the inherited argv loses when the row names a model, a thinking level or tools.
const MODEL_FLAGS: [&str; 2] = ["--provider", "--model"];
const THINKING_FLAGS: [&str; 1] = ["--thinking"];
const TOOL_FLAGS: [&str; 4] = [
    "--tools",
    "--exclude-tools",
    "--no-tools",
    "--no-builtin-tools",
];

impl Agents<'_> {
    fn agent_type(&self, kind: &str) -> Option<&AgentType> {
        self.cfg.agent_settings.types.get(kind)
    }

    /// `requiredChildExtensions`: every entry must name an existing file or folder, or no
    /// subagent starts.
    pub(super) fn check_required_extensions(&self) -> Result<()> {
        for e in &self.cfg.agent_settings.required_child_extensions {
            if !Path::new(e).exists() {
                return Err(Error::new(
                    ErrorCode::InvalidParams,
                    format!(
                        "Invalid requiredChildExtensions entry {e}: no such file or folder; subagents will not start until it is fixed. Repair: correct or remove it in {} and restart the session (serve reads it at start).",
                        self.settings_files()
                    ),
                ));
            }
        }
        Ok(())
    }

    fn settings_files(&self) -> String {
        let s = &self.cfg.agent_settings.sources;
        if s.is_empty() {
            self.cfg
                .agent_dir
                .join(settings::SETTINGS_FILE)
                .display()
                .to_string()
        } else {
            s.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" or ")
        }
    }

    /// The models that have credentials, as `pi --list-models` lists them (asked once per
    /// serve, with the environment children get).
    async fn available_models(&self) -> Result<Arc<Vec<KnownModel>>> {
        let cell = &self.agent.available;
        if let Some(v) = cell.get() {
            return Ok(v.clone());
        }
        let env = vec![(
            "PI_CODING_AGENT_DIR".to_string(),
            self.cfg.agent_dir.display().to_string(),
        )];
        let out =
            crate::runtime::models::list_models(&self.cfg.pi_command, &self.cfg.cwd, &env).await?;
        let list = Arc::new(crate::pi::models::parse_list_models(&out));
        Ok(cell.get_or_init(|| list).clone())
    }

    /// The main session's current model and thinking level: its session file's last
    /// `model_change` and `thinking_level_change`, else what the main Pi's argv names.
    fn main_model(&self) -> (Option<String>, Option<String>) {
        let (mut model, mut thinking) = (None, None);
        if let Ok(Some(file)) = self.root_session_file() {
            if let Ok(s) = crate::pi::session::SessionFile::read(&file) {
                for e in &s.entries {
                    match e["type"].as_str() {
                        Some("model_change") => {
                            if let (Some(p), Some(m)) =
                                (e["provider"].as_str(), e["modelId"].as_str())
                            {
                                model = Some(format!("{p}/{m}"));
                            }
                        }
                        Some("thinking_level_change") => {
                            thinking = e["thinkingLevel"].as_str().map(str::to_string);
                        }
                        _ => {}
                    }
                }
            }
        }
        let (arg_model, arg_thinking) = crate::pi::models::model_of_args(&self.cfg.parent_args);
        (model.or(arg_model), thinking.or(arg_thinking))
    }

    /// The main session's scoped models: `--models` of the Pi argv, else `enabledModels` of
    /// Pi's settings.json in the agent dir; `None` when it has no scope.
    fn model_scope(&self) -> Option<Vec<String>> {
        let args = &self.cfg.parent_args;
        if let Some(v) = args
            .iter()
            .position(|a| a == "--models")
            .and_then(|i| args.get(i + 1))
        {
            return Some(v.split(',').map(|s| s.trim().to_string()).collect());
        }
        let text = std::fs::read_to_string(self.cfg.agent_dir.join("settings.json")).ok()?;
        let v: Value = serde_json::from_str(&text).ok()?;
        let list = v["enabledModels"].as_array()?;
        Some(
            list.iter()
                .filter_map(|m| m.as_str().map(str::to_string))
                .collect(),
        )
    }

    /// The model, thinking level and tools of a new thread of type `kind` under `parent`
    /// (`None`: the main conversation or an independent root).
    pub(super) async fn choose_run(&self, kind: &str, parent: Option<&AgentRow>) -> Result<Choice> {
        let parent_model = parent.and_then(|p| p.model.clone());
        let parent_thinking = parent.and_then(|p| p.thinking.clone());
        let (main_model, main_thinking) = self.main_model();
        let Some(t) = self.agent_type(kind).cloned() else {
            // Not a defined type: the parent's model, as its row or argv say; the thinking
            // level as 0.19 resolves it (no type's: the parent's, else the main session's,
            // else `off`), clamped to what that model supports when Pi lists it.
            let (arg_model, _) = crate::pi::models::model_of_args(&self.cfg.parent_args);
            let model = parent_model.or(arg_model);
            let available = match model {
                // The clamp needs Pi's list; a spawn of such a type never needed it, so a
                // list that cannot be had leaves the level unclamped rather than refusing.
                Some(_) => self.available_models().await.unwrap_or_else(|e| {
                    tracing::warn!("pi --list-models failed; thinking level not clamped: {e}");
                    Arc::default()
                }),
                None => Arc::default(),
            };
            let thinking = settings::choose_thinking(
                [
                    None,
                    None,
                    parent_thinking.as_deref(),
                    main_thinking.as_deref(),
                ],
                model.as_deref(),
                &available,
            );
            return Ok(Choice {
                model,
                thinking: Some(thinking),
                tools: None,
            });
        };
        let s = &self.cfg.agent_settings;
        // Which models have credentials, and which reason (the thinking level is clamped).
        let available = self.available_models().await?;
        let scope = self.model_scope();
        let model = settings::choose_model(&ModelContext {
            selection: s.model_selection,
            listed: &t.models,
            available: &available,
            scope: scope.as_deref(),
            parent: parent_model.as_deref(),
            main: main_model.as_deref(),
        })?;
        let thinking = settings::choose_thinking(
            [
                None,
                t.thinking_level.as_deref(),
                parent_thinking.as_deref(),
                main_thinking.as_deref(),
            ],
            model.as_deref(),
            &available,
        );
        let tools = settings::tool_flags(s.tool_filtering, &t).map(|(_, row)| row.to_string());
        Ok(Choice {
            model,
            thinking: Some(thinking),
            tools,
        })
    }

    /// A reopened run of a defined type under `use-current` takes the main session's current
    /// model again.
    pub(super) fn reopened_choice(&self, row: &AgentRow) -> Option<Choice> {
        self.agent_type(row.kind())?;
        if self.cfg.agent_settings.model_selection != ModelSelection::UseCurrent {
            return None;
        }
        let (main_model, _) = self.main_model();
        (main_model.is_some() && main_model != row.model).then(|| Choice {
            model: main_model,
            thinking: row.thinking.clone(),
            tools: row.tools.clone(),
        })
    }

    /// The argv a run of `row` gets before the managed flags: the inherited flags, less those
    /// the row decides, then the row's model, thinking level and tools, then the required
    /// extensions.
    pub(super) fn run_args(&self, row: &AgentRow, inherited: Vec<String>) -> Vec<String> {
        if self.agent_type(row.kind()).is_none() {
            // Not a defined type: the inherited flags (they name the parent's model: a typed
            // parent's Pi was launched with its own), with the row's thinking level instead
            // of theirs (the view says what the child runs with), plus the extensions.
            let args = match &row.thinking {
                Some(level) => {
                    let mut args = without_flags(inherited, &THINKING_FLAGS);
                    args.extend(["--thinking".to_string(), level.clone()]);
                    args
                }
                None => inherited,
            };
            return self.with_required_extensions(args);
        }
        let mut drop: Vec<&str> = Vec::new();
        if row.model.is_some() {
            drop.extend(MODEL_FLAGS);
        }
        if row.thinking.is_some() {
            drop.extend(THINKING_FLAGS);
        }
        let tools: Option<Value> = row
            .tools
            .as_deref()
            .and_then(|t| serde_json::from_str(t).ok());
        if tools.is_some() {
            drop.extend(TOOL_FLAGS);
        }
        let mut args = without_flags(inherited, &drop);
        if let Some((provider, id)) = row.model.as_deref().and_then(|m| m.split_once('/')) {
            args.extend(["--provider", provider, "--model", id].map(String::from));
        }
        if let Some(level) = &row.thinking {
            args.extend(["--thinking".to_string(), level.clone()]);
        }
        if let Some(t) = tools {
            let names = |key: &str| -> Vec<String> {
                t[key]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            match t["filtering"].as_str() {
                Some("allowed") => {
                    let allowed = names("tools");
                    if allowed.is_empty() {
                        args.push("--no-tools".into());
                    } else {
                        args.extend(["--tools".to_string(), allowed.join(",")]);
                    }
                }
                Some("all-except-blocked") => {
                    let blocked = names("blocked");
                    if !blocked.is_empty() {
                        args.extend(["--exclude-tools".to_string(), blocked.join(",")]);
                    }
                }
                _ => {}
            }
        }
        self.with_required_extensions(args)
    }

    /// `args` and `--extension E` for each required child extension not already in them.
    fn with_required_extensions(&self, mut args: Vec<String>) -> Vec<String> {
        for e in &self.cfg.agent_settings.required_child_extensions {
            let already = args
                .windows(2)
                .any(|w| w[0] == "--extension" && Path::new(&w[1]) == Path::new(e));
            if !already {
                args.extend(["--extension".to_string(), e.clone()]);
            }
        }
        args
    }
}

/// `args` (canonical flag spellings, as `contract::args::inherited_args` writes them) without
/// the flags in `drop` and their values.
fn without_flags(args: Vec<String>, drop: &[&str]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        if drop.contains(&a.as_str()) {
            let takes_value = crate::pi::flags::find(&a)
                .is_some_and(|f| f.arity == crate::pi::flags::Arity::Value);
            if takes_value {
                it.next();
            }
            continue;
        }
        out.push(a);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::without_flags;

    #[test]
    fn dropped_flags_take_their_values_with_them() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            without_flags(
                v(&[
                    "--provider",
                    "fake",
                    "--model",
                    "m",
                    "--no-tools",
                    "--offline",
                    "--tools",
                    "read"
                ]),
                &["--provider", "--model", "--tools", "--no-tools"]
            ),
            v(&["--offline"])
        );
    }
}
