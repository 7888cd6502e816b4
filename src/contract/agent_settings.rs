//! Contract B's settings as the subagent manager 0.19 has them (`finalRecap`, `modelSelection`,
//! `toolFiltering`, `requiredChildExtensions`, and agent types with their models, thinking level
//! and tools), read from threadbase's settings files: the global
//! `$PI_CODING_AGENT_DIR/threadbase-agents.json`, then (only when serve runs `--trusted`) the
//! project's `<cwd>/.pi/threadbase-agents.json`. Scalars of the project file win, the
//! extension lists are united, a type of the project file replaces the global one of its name.
//! Everything here is pure: parsing, validation (every error names the file and ends with a
//! `Repair:`), merging, and the choice of a child's model, thinking level and tools.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::contract::fields::type_name;
use crate::error::{Error, Result};
use crate::pi::flags::THINKING_LEVELS;

/// The settings file's name, in the agent dir and in a project's `.pi/`.
pub const SETTINGS_FILE: &str = "threadbase-agents.json";

/// How a child's model is chosen (`modelSelection`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModelSelection {
    /// The first listed model that has credentials.
    PickFirstAvailable,
    /// The first listed model that has credentials and is in the main session's scope.
    #[default]
    PickFirstScoped,
    /// Always the main session's current model.
    UseCurrent,
}

impl ModelSelection {
    pub fn as_str(self) -> &'static str {
        match self {
            ModelSelection::PickFirstAvailable => "pick-first-available",
            ModelSelection::PickFirstScoped => "pick-first-scoped",
            ModelSelection::UseCurrent => "use-current",
        }
    }
}

/// How a child's tools are chosen (`toolFiltering`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolFiltering {
    /// Only the type's `tools.allow` minus `tools.block` (none when the allow list is empty).
    #[default]
    Allowed,
    /// Every tool but the type's `tools.block`.
    AllExceptBlocked,
    /// Every tool.
    All,
}

impl ToolFiltering {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolFiltering::Allowed => "allowed",
            ToolFiltering::AllExceptBlocked => "all-except-blocked",
            ToolFiltering::All => "all",
        }
    }
}

/// One agent type (`agentTypes.<name>`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentType {
    /// `provider/model-id`, in order of preference (a single `model` is a one-entry list).
    pub models: Vec<String>,
    pub thinking_level: Option<String>,
    pub allow: Vec<String>,
    pub block: Vec<String>,
    /// `"isolation": "worktree"` (issue 48): a child of this type runs in a git worktree of
    /// its own, as `THREADBASE_ISOLATION=worktree` puts every new thread.
    pub worktree: bool,
}

/// Contract B's settings, merged from the files read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentSettings {
    pub final_recap: bool,
    pub model_selection: ModelSelection,
    pub tool_filtering: ToolFiltering,
    /// Extension paths every child loads (`-e`), as written (a relative path is relative to
    /// the file that names it, already joined).
    pub required_child_extensions: Vec<String>,
    pub types: BTreeMap<String, AgentType>,
    /// The files these settings came from.
    pub sources: Vec<PathBuf>,
}

fn bad(file: &Path, what: String, repair: &str) -> Error {
    Error::invalid(format!(
        "Invalid subagent settings in {}: {what}. Repair: {repair}",
        file.display()
    ))
}

const SHAPE: &str = r#"fix the file to the shape {"finalRecap": false, "modelSelection": "pick-first-scoped", "toolFiltering": "allowed", "requiredChildExtensions": ["/abs/ext.ts"], "agentTypes": {"reviewer": {"models": ["provider/model-id"], "thinkingLevel": "low", "tools": {"allow": ["read"], "block": []}, "isolation": "worktree"}}} (every key optional), or delete it; serve reads it only at its start"#;

/// `provider/model-id`: `^[^\s/]+/[^\s]+$`.
pub fn is_model_ref(s: &str) -> bool {
    match s.split_once('/') {
        Some((p, m)) => {
            !p.is_empty()
                && !m.is_empty()
                && !p.chars().any(char::is_whitespace)
                && !m.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

/// A tool name: `^[a-zA-Z0-9_-]+$` (no wildcards).
pub fn is_tool_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn strings(file: &Path, v: &Value, what: &str) -> Result<Vec<String>> {
    let Value::Array(items) = v else {
        return Err(bad(
            file,
            format!("{what} must be an array of strings, got {}", type_name(v)),
            SHAPE,
        ));
    };
    items
        .iter()
        .map(|i| match i {
            Value::String(s) => Ok(s.clone()),
            other => Err(bad(
                file,
                format!("{what} must hold strings, got {}", type_name(other)),
                SHAPE,
            )),
        })
        .collect()
}

fn object<'v>(file: &Path, v: &'v Value, what: &str) -> Result<&'v Map<String, Value>> {
    v.as_object().ok_or_else(|| {
        bad(
            file,
            format!("{what} must be an object, got {}", type_name(v)),
            SHAPE,
        )
    })
}

fn no_unknown(file: &Path, m: &Map<String, Value>, allowed: &[&str], what: &str) -> Result<()> {
    if let Some(k) = m.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(bad(
            file,
            format!(
                "unknown key {} in {what} (accepted: {})",
                crate::paths::json_quote(k),
                allowed.join(", ")
            ),
            SHAPE,
        ));
    }
    Ok(())
}

fn agent_type(file: &Path, name: &str, v: &Value) -> Result<AgentType> {
    let what = format!("agentTypes.{name}");
    let m = object(file, v, &what)?;
    no_unknown(
        file,
        m,
        &["models", "model", "thinkingLevel", "tools", "isolation"],
        &what,
    )?;
    let worktree = match m.get("isolation") {
        None => false,
        Some(Value::String(i)) if i == "worktree" => true,
        Some(Value::String(i)) if i == "none" => false,
        Some(other) => {
            return Err(bad(
                file,
                format!("{what}.isolation must be \"worktree\" or \"none\", got {other}"),
                "write \"isolation\": \"worktree\" to give each child of this type a git worktree of its own, or remove the key",
            ))
        }
    };
    let models = match (m.get("models"), m.get("model")) {
        (Some(_), Some(_)) => {
            return Err(bad(
                file,
                format!("{what} has both models and model"),
                "keep only models (a list in order of preference); model is its one-entry alias",
            ))
        }
        (Some(list), None) => {
            let list = strings(file, list, &format!("{what}.models"))?;
            if list.is_empty() {
                return Err(bad(
                    file,
                    format!("{what}.models is empty"),
                    "list at least one \"provider/model-id\", or remove the key so the type inherits its parent's model",
                ));
            }
            list
        }
        (None, Some(Value::String(one))) => vec![one.clone()],
        (None, Some(other)) => {
            return Err(bad(
                file,
                format!("{what}.model must be a string, got {}", type_name(other)),
                SHAPE,
            ))
        }
        (None, None) => Vec::new(),
    };
    for (i, model) in models.iter().enumerate() {
        if !is_model_ref(model) {
            return Err(bad(
                file,
                format!(
                    "{what}.models has {}, which is not provider/model-id",
                    crate::paths::json_quote(model)
                ),
                "write each model as \"provider/model-id\" (as `pi --list-models` lists them), without spaces",
            ));
        }
        if models[..i].contains(model) {
            return Err(bad(
                file,
                format!("{what}.models lists {model} twice"),
                "list each model once",
            ));
        }
    }
    let thinking_level = match m.get("thinkingLevel") {
        None => None,
        Some(Value::String(l)) if THINKING_LEVELS.contains(&l.as_str()) => Some(l.clone()),
        Some(other) => {
            return Err(bad(
                file,
                format!(
                    "{what}.thinkingLevel must be one of {}, got {other}",
                    THINKING_LEVELS.join(", ")
                ),
                "use one of Pi's thinking levels, or remove the key",
            ))
        }
    };
    let (mut allow, mut block) = (Vec::new(), Vec::new());
    if let Some(t) = m.get("tools") {
        let tm = object(file, t, &format!("{what}.tools"))?;
        no_unknown(file, tm, &["allow", "block"], &format!("{what}.tools"))?;
        if let Some(a) = tm.get("allow") {
            allow = strings(file, a, &format!("{what}.tools.allow"))?;
        }
        if let Some(b) = tm.get("block") {
            block = strings(file, b, &format!("{what}.tools.block"))?;
        }
        for name in allow.iter().chain(&block) {
            if !is_tool_name(name) {
                return Err(bad(
                    file,
                    format!(
                        "{what}.tools names {}, which is not a tool name",
                        crate::paths::json_quote(name)
                    ),
                    "name tools exactly (letters, digits, _ or -; no wildcards), e.g. \"read\", \"bash\", \"agent_update\"",
                ));
            }
        }
    }
    Ok(AgentType {
        models,
        thinking_level,
        allow,
        block,
        worktree,
    })
}

/// The settings of one file's text (`file` names it in errors; relative extension paths are
/// joined to its directory).
pub fn parse_file(file: &Path, text: &str) -> Result<AgentSettingsLayer> {
    let v: Value = serde_json::from_str(text).map_err(|e| {
        bad(
            file,
            format!("not JSON ({e})"),
            "write one JSON object; see docs/configuration.md",
        )
    })?;
    let m = object(file, &v, "the file")?;
    no_unknown(
        file,
        m,
        &[
            "finalRecap",
            "modelSelection",
            "toolFiltering",
            "requiredChildExtensions",
            "agentTypes",
        ],
        "the file",
    )?;
    let mut layer = AgentSettingsLayer::default();
    match m.get("finalRecap") {
        None => {}
        Some(Value::Bool(b)) => layer.final_recap = Some(*b),
        Some(other) => {
            return Err(bad(
                file,
                format!("finalRecap must be true or false, got {other}"),
                "set \"finalRecap\": true or false",
            ))
        }
    }
    layer.model_selection = match m.get("modelSelection") {
        None => None,
        Some(v) => Some(match v.as_str() {
            Some("pick-first-available") => ModelSelection::PickFirstAvailable,
            Some("pick-first-scoped") => ModelSelection::PickFirstScoped,
            Some("use-current") => ModelSelection::UseCurrent,
            _ => {
                return Err(bad(
                    file,
                    format!("modelSelection must be pick-first-available, pick-first-scoped or use-current, got {v}"),
                    "set one of the three, or remove the key (default pick-first-scoped)",
                ))
            }
        }),
    };
    layer.tool_filtering = match m.get("toolFiltering") {
        None => None,
        Some(v) => Some(match v.as_str() {
            Some("allowed") => ToolFiltering::Allowed,
            Some("all-except-blocked") => ToolFiltering::AllExceptBlocked,
            Some("all") => ToolFiltering::All,
            _ => {
                return Err(bad(
                    file,
                    format!("toolFiltering must be allowed, all-except-blocked or all, got {v}"),
                    "set one of the three, or remove the key (default allowed)",
                ))
            }
        }),
    };
    if let Some(list) = m.get("requiredChildExtensions") {
        let dir = file.parent().unwrap_or(Path::new("/"));
        for e in strings(file, list, "requiredChildExtensions")? {
            if e.trim().is_empty() || e.trim() != e {
                return Err(bad(
                    file,
                    format!(
                        "requiredChildExtensions has {}, which is not a path",
                        crate::paths::json_quote(&e)
                    ),
                    "list extension files or folders (absolute, or relative to this file)",
                ));
            }
            let p = Path::new(&e);
            let joined = if p.is_absolute() {
                p.to_path_buf()
            } else {
                dir.join(p)
            };
            layer
                .required_child_extensions
                .push(joined.display().to_string());
        }
    }
    if let Some(types) = m.get("agentTypes") {
        for (name, t) in object(file, types, "agentTypes")? {
            if !crate::paths::is_agent_segment(name) {
                return Err(bad(
                    file,
                    format!(
                        "agentTypes has {}, which is not a type name",
                        crate::paths::json_quote(name)
                    ),
                    "name types with letters, digits, - or _ (the `type` agent_spawn takes)",
                ));
            }
            layer.types.insert(name.clone(), agent_type(file, name, t)?);
        }
    }
    layer.source = Some(file.to_path_buf());
    Ok(layer)
}

/// What one file sets (unset keys are `None` or empty).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentSettingsLayer {
    pub final_recap: Option<bool>,
    pub model_selection: Option<ModelSelection>,
    pub tool_filtering: Option<ToolFiltering>,
    pub required_child_extensions: Vec<String>,
    pub types: BTreeMap<String, AgentType>,
    pub source: Option<PathBuf>,
}

impl AgentSettings {
    /// The global layer, then the project's: scalars of the later win, extension lists are
    /// united (in order, once each), a type of the later replaces the earlier's.
    pub fn merge(layers: impl IntoIterator<Item = AgentSettingsLayer>) -> AgentSettings {
        let mut s = AgentSettings::default();
        for l in layers {
            if let Some(b) = l.final_recap {
                s.final_recap = b;
            }
            if let Some(m) = l.model_selection {
                s.model_selection = m;
            }
            if let Some(t) = l.tool_filtering {
                s.tool_filtering = t;
            }
            for e in l.required_child_extensions {
                if !s.required_child_extensions.contains(&e) {
                    s.required_child_extensions.push(e);
                }
            }
            s.types.extend(l.types);
            s.sources.extend(l.source);
        }
        s
    }

    /// Reads the settings files (the global one in `agent_dir`, then the project's when
    /// `trusted`); a missing file sets nothing, an unreadable or invalid one is an error.
    pub fn load(agent_dir: &Path, project_cwd: Option<&Path>) -> Result<AgentSettings> {
        let mut layers = Vec::new();
        let mut files = vec![agent_dir.join(SETTINGS_FILE)];
        if let Some(cwd) = project_cwd {
            files.push(cwd.join(".pi").join(SETTINGS_FILE));
        }
        for file in files {
            match std::fs::read_to_string(&file) {
                Ok(text) => layers.push(parse_file(&file, &text)?),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(bad(
                        &file,
                        format!("it cannot be read ({e})"),
                        "make it readable, or delete it",
                    ))
                }
            }
        }
        Ok(AgentSettings::merge(layers))
    }
}

/// The tools a child gets, as Pi's flags and as recorded on its row: `None` when no filtering
/// applies (`all`).
pub fn tool_flags(filtering: ToolFiltering, t: &AgentType) -> Option<(Vec<String>, Value)> {
    match filtering {
        ToolFiltering::All => None,
        ToolFiltering::Allowed => {
            let tools: Vec<String> = t
                .allow
                .iter()
                .filter(|n| !t.block.contains(n))
                .cloned()
                .collect();
            let flags = if tools.is_empty() {
                vec!["--no-tools".to_string()]
            } else {
                vec!["--tools".to_string(), tools.join(",")]
            };
            Some((
                flags,
                serde_json::json!({"filtering": "allowed", "tools": tools}),
            ))
        }
        ToolFiltering::AllExceptBlocked => {
            let flags = if t.block.is_empty() {
                Vec::new()
            } else {
                vec!["--exclude-tools".to_string(), t.block.join(",")]
            };
            Some((
                flags,
                serde_json::json!({"filtering": "all-except-blocked", "blocked": t.block}),
            ))
        }
    }
}

pub use crate::pi::models::KnownModel;

/// Whether `model` (`provider/id`) matches one of the main session's scope patterns (Pi's
/// `--models`): `provider/id` or `id` exactly, or a `*` glob over `provider/id`.
pub fn in_scope(model: &str, scope: &[String]) -> bool {
    let id = model.split_once('/').map_or(model, |(_, id)| id);
    scope.iter().any(|p| {
        let p = p
            .split_once(':')
            .map_or(p.as_str(), |(head, _)| head)
            .trim();
        if p.contains('*') {
            glob(p, model) || glob(p, id)
        } else {
            p == model || p == id
        }
    })
}

fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let mut rest = text;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    rest.is_empty()
}

/// What the choice of a child's model starts from.
pub struct ModelContext<'a> {
    pub selection: ModelSelection,
    /// The type's list, in order (empty: the type names none).
    pub listed: &'a [String],
    /// The models that have credentials (`pi --list-models`).
    pub available: &'a [KnownModel],
    /// The main session's scope patterns (`--models`), if it has one.
    pub scope: Option<&'a [String]>,
    /// The parent thread's resolved model, if any.
    pub parent: Option<&'a str>,
    /// The main session's current model, if known.
    pub main: Option<&'a str>,
}

/// The model a child runs with (`Ok(None)`: none known, the child uses Pi's own default), or
/// the error that fails the spawn.
pub fn choose_model(c: &ModelContext<'_>) -> Result<Option<String>> {
    if c.selection == ModelSelection::UseCurrent {
        return Ok(c.main.map(str::to_string));
    }
    if c.listed.is_empty() {
        return Ok(c.parent.or(c.main).map(str::to_string));
    }
    let scoped = c.selection == ModelSelection::PickFirstScoped;
    for m in c.listed {
        let has_credentials = c.available.iter().any(|k| k.reference() == *m);
        let in_scope = !scoped || c.scope.is_none_or(|s| in_scope(m, s));
        if has_credentials && in_scope {
            return Ok(Some(m.clone()));
        }
    }
    let why = if scoped && c.scope.is_some() {
        "has credentials (`pi --list-models`) and is in the main session's scoped models (--models)"
    } else {
        "has credentials (`pi --list-models`)"
    };
    Err(Error::invalid(format!(
        "No model of [{}] is available: none {why}. Repair: add credentials for one of them (models.json, auth.json or the provider's key), list a model that has them, or set modelSelection to use-current in {SETTINGS_FILE}.",
        c.listed.join(", ")
    )))
}

/// A child's thinking level: the restored session's, else the type's, else the parent's, else
/// the main session's, else `off`; `off` when the model does not reason.
pub fn choose_thinking(
    levels: [Option<&str>; 4],
    model: Option<&str>,
    available: &[KnownModel],
) -> String {
    let level = levels.into_iter().flatten().next().unwrap_or("off");
    let reasons = model.and_then(|m| available.iter().find(|k| k.reference() == m));
    match reasons {
        Some(k) if !k.reasoning => "off".to_string(),
        _ => level.to_string(),
    }
}

#[cfg(test)]
mod tests;
