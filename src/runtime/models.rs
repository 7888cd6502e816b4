//! Asking Pi which models have credentials: `<pi command> --list-models`, run once with the
//! environment children get, its standard output returned (parsed by `pi::models`).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::error::{Error, Result};

/// How long `--list-models` may take (it reads models.json and auth; no network offline).
const LIST_MODELS_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `prefix --list-models` in `cwd` with `env` added; its standard output.
pub async fn list_models(
    prefix: &[String],
    cwd: &Path,
    env: &[(String, String)],
) -> Result<String> {
    let (program, args) = prefix.split_first().ok_or_else(|| {
        Error::invalid(
            "The child Pi command is empty. Repair: set THREADBASE_PI_COMMAND like '[\"pi\"]'.",
        )
    })?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .arg("--list-models")
        .current_dir(cwd)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let run = async {
        cmd.output().await.map_err(|e| {
            Error::io(format!(
                "`{program} --list-models` could not run: {e}. Repair: check THREADBASE_PI_COMMAND and that Pi is installed."
            ))
        })
    };
    let out = tokio::time::timeout(LIST_MODELS_TIMEOUT, run)
        .await
        .map_err(|_| {
            Error::io(format!(
                "`{program} --list-models` did not answer within {} s. Repair: check that Pi starts (its models.json and auth.json), then retry.",
                LIST_MODELS_TIMEOUT.as_secs()
            ))
        })??;
    if !out.status.success() {
        return Err(Error::io(format!(
            "`{program} --list-models` failed ({}): {}. Repair: fix what Pi reports, then retry.",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
