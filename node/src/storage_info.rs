//! `gregor storage info`: what `kafka-storage.sh info` prints about a node's directories (every
//! `log.dirs` entry and `metadata.log.dir`): which exist, the `meta.properties` they hold, and
//! any problem (missing, unformatted, unreadable, or disagreeing cluster or node ids).

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::config::NodeConfig;

/// The file `storage format` writes in every directory.
const META_PROPERTIES: &str = "meta.properties";

/// Writes the report for `config`'s directories to `out`; returns whether problems were found
/// (Kafka's tool then exits with status 1).
pub fn info(config: &NodeConfig, out: &mut impl Write) -> io::Result<bool> {
    let mut directories: Vec<PathBuf> = config.log_dirs.clone();
    directories.push(config.metadata_log_dir.clone());
    directories.sort();
    directories.dedup();
    let mut problems = Vec::new();
    let mut found = Vec::new();
    let mut first: Option<BTreeMap<String, String>> = None;
    for directory in &directories {
        if !directory.is_dir() {
            problems.push(if directory.exists() {
                format!("{} is not a directory", directory.display())
            } else {
                format!("{} does not exist", directory.display())
            });
            continue;
        }
        found.push(directory.display().to_string());
        let meta_path = directory.join(META_PROPERTIES);
        if !meta_path.exists() {
            problems.push(format!("{} is not formatted.", directory.display()));
            continue;
        }
        match read_meta(&meta_path) {
            Ok(meta) => match &first {
                None => first = Some(meta),
                Some(earlier) if earlier.get("cluster.id") != meta.get("cluster.id") => {
                    problems.push("Mismatched cluster IDs between storage directories.".into());
                }
                Some(earlier) if earlier.get("node.id") != meta.get("node.id") => {
                    problems.push("Mismatched node IDs between storage directories.".into());
                }
                Some(_) => {}
            },
            Err(reason) => {
                problems.push(format!("Error loading {}: {reason}", meta_path.display()));
            }
        }
    }
    if !found.is_empty() {
        let noun = if found.len() == 1 {
            "directory"
        } else {
            "directories"
        };
        writeln!(out, "Found log {noun}:")?;
        for directory in &found {
            writeln!(out, "  {directory}")?;
        }
        writeln!(out)?;
    }
    if let Some(meta) = &first {
        // Java's TreeMap.toString: {a=1, b=2}.
        let entries: Vec<String> = meta.iter().map(|(k, v)| format!("{k}={v}")).collect();
        writeln!(out, "Found metadata: {{{}}}", entries.join(", "))?;
        writeln!(out)?;
    }
    if !problems.is_empty() {
        let noun = if problems.len() == 1 {
            "problem"
        } else {
            "problems"
        };
        writeln!(out, "Found {noun}:")?;
        for problem in &problems {
            writeln!(out, "  {problem}")?;
        }
        writeln!(out)?;
    }
    Ok(!problems.is_empty())
}

/// The properties of a `meta.properties`; `cluster.id` and `node.id` must be there.
fn read_meta(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let meta: BTreeMap<String, String> = java_properties::read(io::BufReader::new(file))
        .map_err(|e| e.to_string())?
        .into_iter()
        .collect();
    for key in ["cluster.id", "node.id"] {
        if !meta.contains_key(key) {
            return Err(format!("Property {key} is missing"));
        }
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(config: &NodeConfig) -> Result<(String, bool), Box<dyn std::error::Error>> {
        let mut out = Vec::new();
        let problems = info(config, &mut out)?;
        Ok((String::from_utf8(out)?, problems))
    }

    #[test]
    fn formatted_missing_and_unformatted_directories() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let a = tmp.path().join("a");
        let b = tmp.path().join("b");
        let dirs = format!("log.dirs={},{}", a.display(), b.display());
        let config = NodeConfig::load(None, &[dirs])?;
        let (text, problems) = report(&config)?;
        assert!(problems);
        assert_eq!(
            text,
            format!(
                "Found problems:\n  {} does not exist\n  {} does not exist\n\n",
                a.display(),
                b.display()
            )
        );

        std::fs::create_dir_all(&a)?;
        std::fs::create_dir_all(&b)?;
        std::fs::write(
            a.join(META_PROPERTIES),
            "#\nnode.id=1\ndirectory.id=abc\nversion=1\ncluster.id=XYZ\n",
        )?;
        let (text, problems) = report(&config)?;
        assert!(problems);
        assert_eq!(
            text,
            format!(
                "Found log directories:\n  {}\n  {}\n\nFound metadata: {{cluster.id=XYZ, directory.id=abc, node.id=1, version=1}}\n\nFound problem:\n  {} is not formatted.\n\n",
                a.display(),
                b.display(),
                b.display()
            )
        );

        std::fs::write(
            b.join(META_PROPERTIES),
            "node.id=2\ndirectory.id=def\nversion=1\ncluster.id=XYZ\n",
        )?;
        let (text, _) = report(&config)?;
        assert!(
            text.ends_with(
                "Found problem:\n  Mismatched node IDs between storage directories.\n\n"
            ),
            "{text}"
        );

        let single = NodeConfig::load(None, &[format!("log.dirs={}", a.display())])?;
        let (text, problems) = report(&single)?;
        assert!(!problems);
        assert!(text.starts_with(&format!("Found log directory:\n  {}\n\n", a.display())));
        Ok(())
    }
}
