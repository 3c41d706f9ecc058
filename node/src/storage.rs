//! Data directory formatting: `meta.properties` in every log dir, as `kafka-storage.sh format`
//! writes it (version 1: `cluster.id`, `node.id`, `directory.id`).

use base64::Engine as _;
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use uuid::Uuid;

use gregor_publishers::records::{MetadataRecord, UserScramCredentialRecord};
use gregor_publishers::scram::{ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};

use crate::config::NodeConfig;

const META_PROPERTIES: &str = "meta.properties";

/// Written in `metadata.log.dir` by `storage format --standalone` (and by a node that formats
/// its own empty directory): the metadata log starts as a quorum of this node alone.
const BOOTSTRAP_FILE: &str = "gregor-bootstrap.properties";

/// Written in `metadata.log.dir` by `storage format --add-scram`: the SCRAM credentials a new
/// metadata log starts with, one `scram=<mechanism type>,<iterations>,<name>,<salt>,<stored
/// key>,<server key>` line each (name and keys in base64). Derived keys only, never a password.
const SCRAM_BOOTSTRAP_FILE: &str = "gregor-bootstrap-scram.properties";

/// A data directory problem; the message names the path.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The directory cannot be created or written.
    #[error("Log directory {path} is not writable: {reason}")]
    NotWritable {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// `meta.properties` cannot be read or is malformed.
    #[error("Cannot read {path}: {reason}")]
    BadMetaProperties {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The directory belongs to another node or cluster.
    #[error("{path} {reason}")]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// What differs.
        reason: String,
    },
    /// Another process holds a data directory's lock.
    #[error("Failed to acquire lock on file {path} ({reason}): another Gregor process is using this directory; stop it, or give this node its own log.dirs and metadata.log.dir")]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// Why the lock was not taken.
        reason: String,
    },
    /// A directory holding data but no `meta.properties`: formatting it would give that data
    /// a new identity (Kafka refuses: "No readable meta.properties files found.").
    #[error("No readable meta.properties files found in {path}, which holds data ({entries}): restore its meta.properties, or empty the directory to start a new node there")]
    UnformattedData {
        /// The directory.
        path: PathBuf,
        /// The first entries found in it.
        entries: String,
    },
    /// `storage format` found a formatted directory.
    #[error("Log directory {0} is already formatted. Use --ignore-formatted to ignore this directory and format the others.")]
    AlreadyFormatted(PathBuf),
    /// A node that joins a quorum found its directories unformatted.
    #[error("Log directory {0} is not formatted and controller.quorum.bootstrap.servers is set: format it first with `gregor storage format --cluster-id <the cluster's id>` (add --initial-controllers on the initial controllers)")]
    NotFormatted(PathBuf),
    /// `--initial-controllers` is malformed or does not fit this node.
    #[error("Invalid --initial-controllers: {0}")]
    BadInitialControllers(String),
    /// An `--add-scram` entry is malformed.
    #[error("Invalid --add-scram {entry}: {reason}")]
    BadScram {
        /// The entry, with any password hidden.
        entry: String,
        /// What is wrong.
        reason: String,
    },
    /// The SCRAM bootstrap file is unreadable or corrupt.
    #[error("Cannot read {path}: {reason}")]
    BadScramBootstrap {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The cluster id is not a Kafka UUID string.
    #[error("Cluster ID string {0} does not appear to be a valid UUID: expected 22 base64url characters encoding 16 bytes (generate one with `gregor storage random-uuid`)")]
    BadClusterId(String),
}

/// What a formatted directory says about the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaProperties {
    /// The cluster id, Kafka's base64url UUID form.
    pub cluster_id: String,
    /// The node id.
    pub node_id: i32,
    /// The directory's own id.
    pub directory_id: Uuid,
}

/// The identity of a formatted node: cluster id and the metadata log dir's directory id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeIdentity {
    /// The cluster id.
    pub cluster_id: String,
    /// Directory id of `metadata.log.dir`.
    pub metadata_directory_id: Uuid,
    /// Directory ids of `log.dirs`, in order.
    pub log_dir_ids: Vec<Uuid>,
}

pub use gregor_publishers::kafka_uuid::{
    from_kafka_string as uuid_from_kafka_string, to_kafka_string as uuid_to_kafka_string,
};

/// A new random id whose text does not start with '-', as Kafka's `Uuid.randomUuid` ensures:
/// such a string would read as an option on a command line (`--cluster-id -x...`).
pub fn random_kafka_uuid() -> Uuid {
    loop {
        let id = Uuid::new_v4();
        if !uuid_to_kafka_string(id).starts_with('-') {
            return id;
        }
    }
}

/// A new random cluster id, as `kafka-storage.sh random-uuid` prints it.
pub fn random_cluster_id() -> String {
    uuid_to_kafka_string(random_kafka_uuid())
}

/// Name of the lock file every data directory holds while a node uses it (Kafka's `.lock`).
const LOCK_FILE: &str = ".lock";

/// The locks on a node's data directories, held for as long as it runs: a second process
/// given one of them (the same node started twice) would take the other's partitions for
/// strays and move them aside.
#[derive(Debug)]
pub struct DirectoryLocks {
    _files: Vec<fs::File>,
}

/// Locks every log dir and the metadata dir, creating them if needed, or says which one
/// another process holds (Kafka's `LogManager.lockLogDirs`).
pub fn lock_dirs(config: &NodeConfig) -> Result<DirectoryLocks, StorageError> {
    let mut files = Vec::new();
    for dir in all_dirs(config) {
        check_writable(&dir)?;
        let path = dir.join(LOCK_FILE);
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| StorageError::NotWritable {
                path: dir.clone(),
                reason: e.to_string(),
            })?;
        if let Err(error) = file.try_lock() {
            return Err(StorageError::Locked {
                path,
                reason: match error {
                    fs::TryLockError::WouldBlock => "it is held".to_owned(),
                    fs::TryLockError::Error(e) => e.to_string(),
                },
            });
        }
        files.push(file);
    }
    Ok(DirectoryLocks { _files: files })
}

fn all_dirs(config: &NodeConfig) -> Vec<PathBuf> {
    let mut dirs = config.log_dirs.clone();
    if !dirs.contains(&config.metadata_log_dir) {
        dirs.push(config.metadata_log_dir.clone());
    }
    dirs
}

fn read_meta(dir: &Path) -> Result<Option<MetaProperties>, StorageError> {
    let path = dir.join(META_PROPERTIES);
    let file = match fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(StorageError::BadMetaProperties {
                path,
                reason: e.to_string(),
            })
        }
    };
    let bad = |reason: String| StorageError::BadMetaProperties {
        path: path.clone(),
        reason,
    };
    let properties: BTreeMap<String, String> = java_properties::read(std::io::BufReader::new(file))
        .map_err(|e| bad(e.to_string()))?
        .into_iter()
        .collect();
    let field = |key: &str| {
        properties
            .get(key)
            .cloned()
            .ok_or_else(|| bad(format!("missing {key}")))
    };
    if field("version")? != "1" {
        return Err(bad("unsupported version (expected version=1)".to_owned()));
    }
    let node_id = field("node.id")?
        .parse()
        .map_err(|_| bad("node.id is not a number".to_owned()))?;
    let directory_text = field("directory.id")?;
    let directory_id = uuid_from_kafka_string(&directory_text)
        .ok_or_else(|| bad(format!("directory.id {directory_text} is not a valid UUID")))?;
    Ok(Some(MetaProperties {
        cluster_id: field("cluster.id")?,
        node_id,
        directory_id,
    }))
}

fn write_meta(dir: &Path, meta: &MetaProperties) -> Result<(), StorageError> {
    let not_writable = |e: std::io::Error| StorageError::NotWritable {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    };
    fs::create_dir_all(dir).map_err(not_writable)?;
    let contents = format!(
        "#\n#Written by gregor storage format\ncluster.id={}\ndirectory.id={}\nnode.id={}\nversion=1\n",
        meta.cluster_id,
        uuid_to_kafka_string(meta.directory_id),
        meta.node_id
    );
    let temporary = dir.join(format!("{META_PROPERTIES}.tmp"));
    let mut file = fs::File::create(&temporary).map_err(not_writable)?;
    file.write_all(contents.as_bytes()).map_err(not_writable)?;
    file.sync_all().map_err(not_writable)?;
    fs::rename(&temporary, dir.join(META_PROPERTIES)).map_err(not_writable)?;
    if let Ok(directory) = fs::File::open(dir) {
        directory.sync_all().map_err(not_writable)?;
    }
    Ok(())
}

fn check_writable(dir: &Path) -> Result<(), StorageError> {
    let not_writable = |e: std::io::Error| StorageError::NotWritable {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    };
    fs::create_dir_all(dir).map_err(not_writable)?;
    let probe = dir.join(".gregor-write-check");
    fs::write(&probe, b"ok").map_err(not_writable)?;
    fs::remove_file(&probe).map_err(not_writable)
}

/// One entry of `--initial-controllers`: `id@host:port:directoryid`, as kafka-storage.sh takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitialController {
    /// The controller's node id.
    pub id: i32,
    /// Host of its controller listener.
    pub host: String,
    /// Port of its controller listener.
    pub port: u16,
    /// Directory id of its metadata log dir.
    pub directory_id: Uuid,
}

/// Parses `id@host:port:directoryid,...` (IPv6 hosts in brackets).
pub fn parse_initial_controllers(text: &str) -> Result<Vec<InitialController>, StorageError> {
    let bad = |entry: &str, why: &str| {
        StorageError::BadInitialControllers(format!(
            "'{entry}' {why}; expected id@host:port:directoryid, e.g. 1@localhost:9093:{}",
            uuid_to_kafka_string(Uuid::from_u128(0x1234))
        ))
    };
    let mut controllers: Vec<InitialController> = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (id, rest) = entry
            .split_once('@')
            .ok_or_else(|| bad(entry, "has no '@'"))?;
        let id: i32 = id
            .parse()
            .ok()
            .filter(|id| *id >= 0)
            .ok_or_else(|| bad(entry, "does not start with a non-negative node id"))?;
        let (address, directory) = rest
            .rsplit_once(':')
            .ok_or_else(|| bad(entry, "has no directory id"))?;
        let directory_id = uuid_from_kafka_string(directory)
            .filter(|d| !d.is_nil())
            .ok_or_else(|| bad(entry, "has an invalid directory id"))?;
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| bad(entry, "has no port"))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| bad(entry, "has an invalid port"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(bad(entry, "has an empty host"));
        }
        if controllers.iter().any(|c| c.id == id) {
            return Err(bad(entry, "repeats a node id"));
        }
        controllers.push(InitialController {
            id,
            host: host.to_owned(),
            port,
            directory_id,
        });
    }
    if controllers.is_empty() {
        return Err(StorageError::BadInitialControllers(
            "no controllers given".to_owned(),
        ));
    }
    Ok(controllers)
}

fn format_initial_controllers(controllers: &[InitialController]) -> String {
    controllers
        .iter()
        .map(|c| {
            let host = if c.host.contains(':') {
                format!("[{}]", c.host)
            } else {
                c.host.clone()
            };
            format!(
                "{}@{host}:{}:{}",
                c.id,
                c.port,
                uuid_to_kafka_string(c.directory_id)
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Formats every unformatted directory of the node (`gregor storage format`).
///
/// Directories that are already formatted are an error unless `ignore_formatted`.
pub fn format(
    config: &NodeConfig,
    cluster_id: &str,
    ignore_formatted: bool,
    standalone: bool,
) -> Result<Vec<PathBuf>, StorageError> {
    format_with(config, cluster_id, ignore_formatted, standalone, None, &[])
}

/// [`format`] with `--initial-controllers`: the metadata log starts as a quorum of those
/// controllers; when this node is one of them, its metadata dir takes the directory id given
/// for it there (as kafka-storage.sh does), so every voter agrees on the voter set.
pub fn format_with(
    config: &NodeConfig,
    cluster_id: &str,
    ignore_formatted: bool,
    standalone: bool,
    initial_controllers: Option<&[InitialController]>,
    scram: &[UserScramCredentialRecord],
) -> Result<Vec<PathBuf>, StorageError> {
    if uuid_from_kafka_string(cluster_id).is_none() {
        return Err(StorageError::BadClusterId(cluster_id.to_owned()));
    }
    if standalone && initial_controllers.is_some() {
        return Err(StorageError::BadInitialControllers(
            "--standalone and --initial-controllers cannot be used together".to_owned(),
        ));
    }
    let own_directory = initial_controllers
        .and_then(|all| all.iter().find(|c| c.id == config.node_id))
        .map(|c| c.directory_id);
    let mut formatted = Vec::new();
    for dir in all_dirs(config) {
        if read_meta(&dir)?.is_some() {
            if ignore_formatted {
                continue;
            }
            return Err(StorageError::AlreadyFormatted(dir));
        }
        check_writable(&dir)?;
        write_meta(
            &dir,
            &MetaProperties {
                cluster_id: cluster_id.to_owned(),
                node_id: config.node_id,
                directory_id: match own_directory {
                    Some(id) if dir == config.metadata_log_dir => id,
                    _ => random_kafka_uuid(),
                },
            },
        )?;
        formatted.push(dir);
    }
    if standalone {
        write_bootstrap(&config.metadata_log_dir)?;
    }
    if !scram.is_empty() && formatted.contains(&config.metadata_log_dir) {
        write_scram_bootstrap(&config.metadata_log_dir, scram)?;
    }
    if let Some(controllers) = initial_controllers {
        fs::write(
            config.metadata_log_dir.join(BOOTSTRAP_FILE),
            format!(
                "# The metadata log starts as a quorum of these controllers.\ninitial.controllers={}\n",
                format_initial_controllers(controllers)
            ),
        )
        .map_err(|e| StorageError::NotWritable {
            path: config.metadata_log_dir.clone(),
            reason: e.to_string(),
        })?;
    }
    Ok(formatted)
}

/// Parses one `--add-scram` entry as kafka-storage.sh does:
/// `SCRAM-SHA-256=[name=alice,password=alice-secret]`, with optional `iterations` (4096) and
/// `salt` (base64), or `salt` and `saltedpassword` (base64) instead of `password`. Values may be
/// quoted.
pub fn parse_add_scram(entry: &str) -> Result<UserScramCredentialRecord, StorageError> {
    let shown = if entry.contains("password") {
        entry
            .split_once('=')
            .map_or("[hidden]".to_owned(), |(m, _)| format!("{m}=[hidden]"))
    } else {
        entry.to_owned()
    };
    let bad = |reason: &str| StorageError::BadScram {
        entry: shown.clone(),
        reason: reason.to_owned(),
    };
    let (mechanism, body) = entry
        .split_once('=')
        .ok_or_else(|| bad("expected MECHANISM=[key=value,...]"))?;
    let mechanism = ScramMechanism::from_name(mechanism.trim())
        .ok_or_else(|| bad("the mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512"))?;
    let body = body
        .trim()
        .strip_prefix('[')
        .and_then(|b| b.strip_suffix(']'))
        .ok_or_else(|| bad("expected the settings in square brackets"))?;
    let mut settings = BTreeMap::new();
    for pair in body.split(',').filter(|p| !p.trim().is_empty()) {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| bad("expected key=value settings"))?;
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        settings.insert(key.trim().to_ascii_lowercase(), value.to_owned());
    }
    let base64 = |key: &str| -> Result<Option<Vec<u8>>, StorageError> {
        settings
            .get(key)
            .map(|v| {
                base64::engine::general_purpose::STANDARD
                    .decode(v)
                    .map_err(|_| bad(&format!("{key} is not base64")))
            })
            .transpose()
    };
    let name = settings
        .get("name")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| bad("name is required"))?
        .clone();
    let iterations = match settings.get("iterations") {
        Some(text) => text
            .parse::<i32>()
            .map_err(|_| bad("iterations is not a number"))?,
        None => MIN_ITERATIONS,
    };
    if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
        return Err(bad(&format!(
            "iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}"
        )));
    }
    let salt = match base64("salt")? {
        Some(salt) => salt,
        None => {
            use rand::RngCore;
            let mut salt = vec![0u8; 32];
            rand::rng().fill_bytes(&mut salt);
            salt
        }
    };
    let credential = match (settings.get("password"), base64("saltedpassword")?) {
        (Some(password), None) => mechanism.credential(password.as_bytes(), salt, iterations),
        (None, Some(salted)) if settings.contains_key("salt") => {
            mechanism.credential_from_salted(salt, &salted, iterations)
        }
        (None, Some(_)) => return Err(bad("saltedpassword needs salt")),
        _ => {
            return Err(bad(
                "exactly one of password and saltedpassword is required",
            ))
        }
    };
    Ok(UserScramCredentialRecord {
        name,
        mechanism: mechanism.type_code(),
        salt: credential.salt,
        stored_key: credential.stored_key,
        server_key: credential.server_key,
        iterations,
    })
}

fn write_scram_bootstrap(
    dir: &Path,
    credentials: &[UserScramCredentialRecord],
) -> Result<(), StorageError> {
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut text = String::from(
        "# SCRAM credentials the metadata log starts with (storage format --add-scram).\n",
    );
    for c in credentials {
        text.push_str(&format!(
            "scram={},{},{},{},{},{}\n",
            c.mechanism,
            c.iterations,
            b64(c.name.as_bytes()),
            b64(&c.salt),
            b64(&c.stored_key),
            b64(&c.server_key)
        ));
    }
    fs::write(dir.join(SCRAM_BOOTSTRAP_FILE), text).map_err(|e| StorageError::NotWritable {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    })
}

/// The SCRAM credential records of `storage format --add-scram`, for a new metadata log.
pub fn bootstrap_scram_records(config: &NodeConfig) -> Result<Vec<MetadataRecord>, StorageError> {
    let path = config.metadata_log_dir.join(SCRAM_BOOTSTRAP_FILE);
    let Ok(text) = fs::read_to_string(&path) else {
        return Ok(Vec::new());
    };
    let corrupt = |line: usize| StorageError::BadScramBootstrap {
        path: path.clone(),
        reason: format!("line {line} is not a credential"),
    };
    let decode = |text: &str| base64::engine::general_purpose::STANDARD.decode(text).ok();
    let mut records = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let Some(fields) = line.trim().strip_prefix("scram=") else {
            continue;
        };
        let fields: Vec<&str> = fields.split(',').collect();
        let [mechanism, iterations, name, salt, stored, server] = fields[..] else {
            return Err(corrupt(index + 1));
        };
        let record = (|| {
            Some(UserScramCredentialRecord {
                mechanism: ScramMechanism::from_type(mechanism.parse().ok()?)?.type_code(),
                iterations: iterations.parse().ok()?,
                name: String::from_utf8(decode(name)?).ok()?,
                salt: decode(salt)?,
                stored_key: decode(stored)?,
                server_key: decode(server)?,
            })
        })()
        .ok_or_else(|| corrupt(index + 1))?;
        records.push(MetadataRecord::UserScramCredential(record));
    }
    Ok(records)
}

/// The directory id in `dir`'s `meta.properties`, `None` when it is not formatted.
pub fn directory_id_in(dir: &Path) -> Result<Option<Uuid>, StorageError> {
    Ok(read_meta(dir)?.map(|meta| meta.directory_id))
}

/// The initial voters written by `storage format --initial-controllers`, if any.
pub fn initial_controllers(
    config: &NodeConfig,
) -> Result<Option<Vec<InitialController>>, StorageError> {
    let Ok(text) = fs::read_to_string(config.metadata_log_dir.join(BOOTSTRAP_FILE)) else {
        return Ok(None);
    };
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("initial.controllers="))
        .map(parse_initial_controllers)
        .next()
        .transpose()
}

fn write_bootstrap(dir: &Path) -> Result<(), StorageError> {
    fs::write(
        dir.join(BOOTSTRAP_FILE),
        "# The metadata log starts as a quorum of this node alone.\nstandalone=true\n",
    )
    .map_err(|e| StorageError::NotWritable {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    })
}

/// Whether this node may start a brand-new metadata log with itself as the only voter.
pub fn is_standalone(config: &NodeConfig) -> bool {
    fs::read_to_string(config.metadata_log_dir.join(BOOTSTRAP_FILE))
        .is_ok_and(|text| text.lines().any(|line| line.trim() == "standalone=true"))
}

/// Entries a directory may hold and still be formatted by a starting node: the node's own lock
/// file and a file system's `lost+found` (a log dir at a mount point).
const FORMATTABLE_ENTRIES: [&str; 2] = [LOCK_FILE, "lost+found"];

/// Refuses to format `dir` when it holds data: partition logs, checkpoints or a metadata log
/// whose `meta.properties` is missing belong to a cluster and a node this one cannot know.
fn refuse_data_without_identity(dir: &Path) -> Result<(), StorageError> {
    let entries = fs::read_dir(dir).map_err(|e| StorageError::NotWritable {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    })?;
    let mut found: Vec<String> = entries
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| !FORMATTABLE_ENTRIES.contains(&name.as_str()))
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    found.sort();
    let more = found.len().saturating_sub(3);
    found.truncate(3);
    let mut entries = found.join(", ");
    if more > 0 {
        entries.push_str(&format!(" and {more} more"));
    }
    Err(StorageError::UnformattedData {
        path: dir.to_path_buf(),
        entries,
    })
}

/// Checks every directory is writable and formatted for this node, formatting empty ones
/// (with the cluster id found in the others, or a new one), and returns the node's identity.
/// A node that formats all of its directories itself starts standalone, as after
/// `storage format --standalone`: the README's one command gives a working single node.
pub fn ensure_formatted(config: &NodeConfig) -> Result<NodeIdentity, StorageError> {
    let dirs = all_dirs(config);
    let mut found = Vec::new();
    for dir in &dirs {
        check_writable(dir)?;
        found.push(read_meta(dir)?);
    }
    let cluster_id = found
        .iter()
        .flatten()
        .map(|m| m.cluster_id.clone())
        .next()
        .unwrap_or_else(random_cluster_id);
    let fresh = found.iter().all(Option::is_none);
    if fresh && !config.controller_quorum_bootstrap_servers.is_empty() {
        // Joining an existing quorum needs its cluster id; a made-up one would be refused.
        return Err(StorageError::NotFormatted(config.metadata_log_dir.clone()));
    }
    let mut ids = BTreeMap::new();
    for (dir, meta) in dirs.iter().zip(found) {
        let meta = match meta {
            Some(meta) => {
                let path = dir.join(META_PROPERTIES);
                if meta.node_id != config.node_id {
                    return Err(StorageError::Mismatch {
                        path,
                        reason: format!(
                            "belongs to node.id {} but this node is configured with node.id {}; point log.dirs at this node's own directory",
                            meta.node_id, config.node_id
                        ),
                    });
                }
                if meta.cluster_id != cluster_id {
                    return Err(StorageError::Mismatch {
                        path,
                        reason: format!(
                            "belongs to cluster {} but the node's other directories belong to cluster {cluster_id}",
                            meta.cluster_id
                        ),
                    });
                }
                meta
            }
            None => {
                refuse_data_without_identity(dir)?;
                let meta = MetaProperties {
                    cluster_id: cluster_id.clone(),
                    node_id: config.node_id,
                    directory_id: random_kafka_uuid(),
                };
                write_meta(dir, &meta)?;
                tracing::info!(dir = %dir.display(), %cluster_id, "formatted data directory");
                meta
            }
        };
        ids.insert(dir.clone(), meta.directory_id);
    }
    if fresh {
        write_bootstrap(&config.metadata_log_dir)?;
    }
    Ok(NodeIdentity {
        cluster_id,
        metadata_directory_id: ids
            .get(&config.metadata_log_dir)
            .copied()
            .unwrap_or_default(),
        log_dir_ids: config
            .log_dirs
            .iter()
            .map(|d| ids.get(d).copied().unwrap_or_default())
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_in(dir: &Path, node_id: i32) -> Result<NodeConfig, Box<dyn std::error::Error>> {
        Ok(NodeConfig::load(
            None,
            &[
                format!("log.dirs={}", dir.display()),
                format!("node.id={node_id}"),
            ],
        )?)
    }

    #[test]
    fn add_scram_entries_as_kafka_storage_reads_them() -> Result<(), Box<dyn std::error::Error>> {
        let record = parse_add_scram(
            "SCRAM-SHA-512=[name=alice,iterations=8192,salt=\"c2FsdA==\",password=alice-secret]",
        )?;
        let expected = ScramMechanism::Sha512.credential(b"alice-secret", b"salt".to_vec(), 8192);
        assert_eq!(
            (record.name.as_str(), record.mechanism, record.iterations),
            ("alice", 2, 8192)
        );
        assert_eq!(
            (
                record.salt.clone(),
                record.stored_key.clone(),
                record.server_key.clone()
            ),
            (expected.salt, expected.stored_key, expected.server_key)
        );
        let salted = base64::engine::general_purpose::STANDARD
            .encode(ScramMechanism::Sha256.salted_password(b"pw", b"salt", 4096));
        let from_salted = parse_add_scram(&format!(
            "SCRAM-SHA-256=[name=bob,salt=\"c2FsdA==\",saltedpassword=\"{salted}\"]"
        ))?;
        let expected = ScramMechanism::Sha256.credential(b"pw", b"salt".to_vec(), 4096);
        assert_eq!(from_salted.stored_key, expected.stored_key);
        for bad in [
            "SCRAM-SHA-1=[name=a,password=b]",
            "SCRAM-SHA-256=[password=b]",
            "SCRAM-SHA-256=[name=a]",
            "SCRAM-SHA-256=[name=a,password=b,iterations=100]",
            "SCRAM-SHA-256=[name=a,saltedpassword=AAAA]",
            "SCRAM-SHA-256=name=a,password=b",
        ] {
            let error = parse_add_scram(bad).map(|_| ()).unwrap_err().to_string();
            assert!(!error.contains("password=b"), "{error}");
        }
        // Written at format time, read back as the records a new log starts with.
        let dir = tempfile::tempdir()?;
        let config = config_in(dir.path(), 1)?;
        format_with(
            &config,
            &random_cluster_id(),
            false,
            true,
            None,
            std::slice::from_ref(&record),
        )?;
        assert_eq!(
            bootstrap_scram_records(&config)?,
            vec![MetadataRecord::UserScramCredential(record)]
        );
        Ok(())
    }

    #[test]
    fn random_ids_never_read_as_options() {
        for _ in 0..2_000 {
            assert!(!random_cluster_id().starts_with('-'));
        }
    }

    #[test]
    fn uuid_text_matches_kafkas_form() {
        let id = Uuid::from_u128(0);
        assert_eq!(uuid_to_kafka_string(id), "AAAAAAAAAAAAAAAAAAAAAA");
        let random = Uuid::new_v4();
        assert_eq!(
            uuid_from_kafka_string(&uuid_to_kafka_string(random)),
            Some(random)
        );
        assert_eq!(uuid_from_kafka_string("not-a-uuid"), None);
    }

    #[test]
    fn empty_directory_is_formatted_once() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let config = config_in(dir.path(), 3)?;
        let first = ensure_formatted(&config)?;
        let second = ensure_formatted(&config)?;
        assert_eq!(first, second);
        assert!(is_standalone(&config));
        let meta = read_meta(dir.path())?.ok_or("meta.properties missing")?;
        assert_eq!(meta.node_id, 3);
        assert_eq!(meta.directory_id, first.metadata_directory_id);
        Ok(())
    }

    #[test]
    fn another_nodes_directory_is_refused() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        ensure_formatted(&config_in(dir.path(), 1)?)?;
        let error = ensure_formatted(&config_in(dir.path(), 2)?)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(error.contains("node.id 1"), "{error}");
        Ok(())
    }

    #[test]
    fn a_directory_in_use_is_refused_until_its_lock_is_released(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let config = config_in(dir.path(), 1)?;
        let held = lock_dirs(&config)?;
        let error = lock_dirs(&config).map(|_| ()).unwrap_err().to_string();
        assert!(
            error.starts_with("Failed to acquire lock on file")
                && error.contains("another Gregor process is using this directory"),
            "{error}"
        );
        drop(held);
        lock_dirs(&config)?;
        Ok(())
    }

    #[test]
    fn initial_controllers_parse_as_kafka_writes_them() -> Result<(), Box<dyn std::error::Error>> {
        let d1 = Uuid::from_u128(1);
        let text = format!(
            "1@localhost:9093:{},2@[::1]:9094:{}",
            uuid_to_kafka_string(d1),
            uuid_to_kafka_string(Uuid::from_u128(2))
        );
        let parsed = parse_initial_controllers(&text)?;
        assert_eq!(
            parsed[0],
            InitialController {
                id: 1,
                host: "localhost".into(),
                port: 9093,
                directory_id: d1
            }
        );
        assert_eq!(parsed[1].host, "::1");
        assert_eq!(format_initial_controllers(&parsed), text);
        for bad in [
            "",
            "1localhost:9093:x",
            "-1@h:1:AAAAAAAAAAAAAAAAAAAAAQ",
            "1@h:0:AAAAAAAAAAAAAAAAAAAAAQ",
            "1@h:1:AAAAAAAAAAAAAAAAAAAAAA",
        ] {
            assert!(parse_initial_controllers(bad).is_err(), "{bad}");
        }
        // A listed node takes its directory id; the list is kept for start-up.
        let dir = tempfile::tempdir()?;
        let config = config_in(dir.path(), 1)?;
        format_with(
            &config,
            &random_cluster_id(),
            false,
            false,
            Some(&parsed),
            &[],
        )?;
        assert_eq!(read_meta(dir.path())?.map(|m| m.directory_id), Some(d1));
        assert_eq!(initial_controllers(&config)?, Some(parsed));
        assert!(!is_standalone(&config));
        Ok(())
    }

    #[test]
    fn explicit_format_refuses_formatted_directories() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let config = config_in(dir.path(), 1)?;
        let cluster_id = random_cluster_id();
        assert_eq!(format(&config, &cluster_id, false, false)?.len(), 1);
        assert!(!is_standalone(&config));
        assert!(matches!(
            format(&config, &cluster_id, false, true),
            Err(StorageError::AlreadyFormatted(_))
        ));
        assert!(format(&config, &cluster_id, true, true)?.is_empty());
        assert!(is_standalone(&config));
        assert!(matches!(
            format(&config, "bad", false, false),
            Err(StorageError::BadClusterId(_))
        ));
        Ok(())
    }
}
