//! `gregor acls`: kafka-acls.sh (Kafka's `AclCommand`) with its flags and output, over
//! CreateAcls, DescribeAcls and DeleteAcls.
//!
//! Resources come from `--topic`, `--group`, `--cluster`, `--transactional-id`,
//! `--delegation-token` and `--user-principal` with `--resource-pattern-type`; entries from
//! `--allow-principal`/`--deny-principal` × `--allow-host`/`--deny-host` (default `*`) ×
//! `--operation` (default ALL), or from the `--producer` / `--consumer` conveniences. Kafka
//! prints resources in hash order; Gregor prints them sorted.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::PathBuf;

use clap::Args;
use gregor_publishers::acl::{
    AclOperation, AclPermission, PatternType, ResourceType, CLUSTER_NAME, WILDCARD,
};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;

use super::{block_on, check, usage_exit, AdminClient, AdminError, CommandConfig};

/// `gregor acls`: kafka-acls.sh.
#[derive(Args, Debug, Default)]
pub struct AclsArgs {
    /// REQUIRED: the server(s) to connect to, host1:port1,host2:port2.
    #[arg(long, required = true)]
    pub bootstrap_server: String,
    /// A property file containing configs to be passed to Admin Client (`client.id`,
    /// `security.protocol=SASL_PLAINTEXT` with `sasl.mechanism=PLAIN` and `sasl.jaas.config`).
    #[arg(long)]
    pub command_config: Option<PathBuf>,
    /// Indicates you are trying to add ACLs.
    #[arg(long)]
    pub add: bool,
    /// Indicates you are trying to remove ACLs.
    #[arg(long)]
    pub remove: bool,
    /// List ACLs for the specified resource, use --topic <topic> or --group <group> or
    /// --cluster to specify a resource.
    #[arg(long)]
    pub list: bool,
    /// Topic to which ACLs should be added or removed. A value of '*' indicates ACL should apply
    /// to all topics.
    #[arg(long)]
    pub topic: Vec<String>,
    /// Consumer Group to which the ACLs should be added or removed. A value of '*' indicates the
    /// ACLs should apply to all groups.
    #[arg(long)]
    pub group: Vec<String>,
    /// Add/Remove cluster ACLs.
    #[arg(long)]
    pub cluster: bool,
    /// The transactionalId to which ACLs should be added or removed. A value of '*' indicates
    /// the ACLs should apply to all transactionalIds.
    #[arg(long)]
    pub transactional_id: Vec<String>,
    /// Delegation token to which ACLs should be added or removed.
    #[arg(long)]
    pub delegation_token: Vec<String>,
    /// Specifies a user principal as a resource (CreateTokens / DescribeTokens).
    #[arg(long)]
    pub user_principal: Vec<String>,
    /// The type of the resource pattern or pattern filter: literal or prefixed when adding;
    /// any or match also when listing or removing.
    #[arg(long, default_value = "LITERAL")]
    pub resource_pattern_type: String,
    /// Operation that is being allowed or denied (Read, Write, Create, Delete, Alter, Describe,
    /// ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens,
    /// DescribeTokens, All).
    #[arg(long)]
    pub operation: Vec<String>,
    /// Principal in principalType:name format, e.g. User:alice (User:'*' is every user).
    #[arg(long)]
    pub allow_principal: Vec<String>,
    /// Principal denied, in principalType:name format. DENY rules take precedence over ALLOW.
    #[arg(long)]
    pub deny_principal: Vec<String>,
    /// List ACLs for the specified principal.
    #[arg(long)]
    pub principal: Vec<String>,
    /// Host from which --allow-principal principals have access ('*' by default).
    #[arg(long)]
    pub allow_host: Vec<String>,
    /// Host from which --deny-principal principals are denied ('*' by default).
    #[arg(long)]
    pub deny_host: Vec<String>,
    /// Convenience option to add/remove ACLs for the producer role: WRITE, DESCRIBE and CREATE
    /// on topics (WRITE, DESCRIBE on transactional ids).
    #[arg(long)]
    pub producer: bool,
    /// Convenience option to add/remove ACLs for the consumer role: READ, DESCRIBE on topics
    /// and READ on groups.
    #[arg(long)]
    pub consumer: bool,
    /// With --producer: IDEMPOTENT_WRITE on the cluster too.
    #[arg(long)]
    pub idempotent: bool,
    /// Assume Yes to all queries and do not prompt.
    #[arg(long)]
    pub force: bool,
}

/// A resource pattern (or pattern filter), ordered for printing.
type Pattern = (ResourceType, Option<String>, PatternType);

/// An entry: (principal, host, operation, permission).
type Entry = (String, String, AclOperation, AclPermission);

/// Kafka's `ResourcePattern.toString` (and `ResourcePatternFilter`'s, `<any>` for no name).
fn pattern_text((resource_type, name, pattern_type): &Pattern) -> String {
    format!(
        "ResourcePattern(resourceType={resource_type}, name={}, patternType={pattern_type})",
        name.as_deref().unwrap_or("<any>")
    )
}

/// Kafka's `AccessControlEntry.toString`.
fn entry_text((principal, host, operation, permission): &Entry) -> String {
    format!(
        "(principal={principal}, host={host}, operation={operation}, permissionType={permission})"
    )
}

fn usage(message: &str) -> ! {
    usage_exit::<AclsArgs>("acls", message)
}

/// `SecurityUtils.operation`: `Read`, `read`, `DESCRIBE_CONFIGS` and `DescribeConfigs` all work.
fn parse_operation(text: &str) -> Option<AclOperation> {
    let normalized: String = text.trim().chars().filter(|c| *c != '_').collect();
    AclOperation::ALL_VALUES
        .iter()
        .copied()
        .filter(|o| o.is_concrete())
        .find(|o| o.name().replace('_', "").eq_ignore_ascii_case(&normalized))
}

/// `SecurityUtils.parseKafkaPrincipal`.
fn parse_principal(text: &str) -> String {
    let text = text.trim();
    match text.split_once(':') {
        Some((kind, _)) if !kind.is_empty() => text.to_owned(),
        _ => usage(&format!(
            "expected a string in format principalType:principalName but got {text}"
        )),
    }
}

fn pattern_type(args: &AclsArgs) -> PatternType {
    PatternType::from_name(args.resource_pattern_type.trim())
        .filter(|p| *p != PatternType::Unknown)
        .unwrap_or_else(|| {
            usage(&format!(
                "Unknown value for --resource-pattern-type: {} (LITERAL, PREFIXED, ANY or MATCH)",
                args.resource_pattern_type
            ))
        })
}

/// `getResourceFilter`: the resources the command line names.
fn resource_filters(args: &AclsArgs, die_if_none: bool) -> BTreeSet<Pattern> {
    let pattern = pattern_type(args);
    let mut out = BTreeSet::new();
    let mut named = |t: ResourceType, names: &[String]| {
        for name in names {
            out.insert((t, Some(name.trim().to_owned()), pattern));
        }
    };
    named(ResourceType::Topic, &args.topic);
    named(ResourceType::Group, &args.group);
    named(ResourceType::TransactionalId, &args.transactional_id);
    named(ResourceType::DelegationToken, &args.delegation_token);
    named(ResourceType::User, &args.user_principal);
    if pattern == PatternType::Literal && (args.cluster || args.idempotent) {
        out.insert((
            ResourceType::Cluster,
            Some(CLUSTER_NAME.to_owned()),
            PatternType::Literal,
        ));
    }
    if out.is_empty() && die_if_none {
        usage("You must provide at least one resource: --topic <topic> or --cluster or --group <group> or --delegation-token <Delegation Token ID>");
    }
    out
}

/// `getAcl`: principals × hosts × operations, ALLOW and DENY.
fn entries(args: &AclsArgs, operations: &BTreeSet<AclOperation>) -> BTreeSet<Entry> {
    let hosts = |hosts: &[String], principals: &[String]| -> Vec<String> {
        if !hosts.is_empty() {
            hosts.iter().map(|h| h.trim().to_owned()).collect()
        } else if !principals.is_empty() {
            vec![WILDCARD.to_owned()]
        } else {
            Vec::new()
        }
    };
    let mut out = BTreeSet::new();
    for (principals, host_list, permission) in [
        (
            &args.allow_principal,
            &args.allow_host,
            AclPermission::Allow,
        ),
        (&args.deny_principal, &args.deny_host, AclPermission::Deny),
    ] {
        for principal in principals {
            let principal = parse_principal(principal);
            for host in hosts(host_list, principals) {
                for operation in operations {
                    out.insert((principal.clone(), host.clone(), *operation, permission));
                }
            }
        }
    }
    out
}

/// `getResourceFilterToAcls`: what to add or remove, per resource.
fn resource_to_entries(args: &AclsArgs) -> BTreeMap<Pattern, BTreeSet<Entry>> {
    use AclOperation::*;
    let mut out: BTreeMap<Pattern, BTreeSet<Entry>> = BTreeMap::new();
    if !args.producer && !args.consumer {
        let operations: BTreeSet<AclOperation> = if args.operation.is_empty() {
            [All].into()
        } else {
            args.operation
                .iter()
                .map(|o| {
                    parse_operation(o)
                        .unwrap_or_else(|| usage(&format!("Unknown operation: {}", o.trim())))
                })
                .collect()
        };
        let acls = entries(args, &operations);
        for filter in resource_filters(args, true) {
            out.insert(filter, acls.clone());
        }
    }
    let filters = resource_filters(args, true);
    if args.producer {
        for filter in &filters {
            let operations: BTreeSet<AclOperation> = match filter.0 {
                ResourceType::Topic => [Write, Describe, Create].into(),
                ResourceType::TransactionalId => [Write, Describe].into(),
                ResourceType::Cluster if args.idempotent => [IdempotentWrite].into(),
                _ => continue,
            };
            out.insert(filter.clone(), entries(args, &operations));
        }
    }
    if args.consumer {
        for filter in &filters {
            let operations: BTreeSet<AclOperation> = match filter.0 {
                ResourceType::Topic => [Read, Describe].into(),
                ResourceType::Group => [Read].into(),
                _ => continue,
            };
            out.entry(filter.clone())
                .or_default()
                .extend(entries(args, &operations));
        }
    }
    // `validateOperation`.
    for ((resource_type, ..), acls) in &out {
        let mut valid: Vec<AclOperation> = resource_type.supported_operations().to_vec();
        valid.push(All);
        if acls.iter().any(|(_, _, op, _)| !valid.contains(op)) {
            let names: Vec<&str> = valid.iter().map(|o| o.name()).collect();
            usage(&format!(
                "ResourceType {resource_type} only supports operations {}",
                names.join(", ")
            ));
        }
    }
    out
}

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// Every ACL matching the pattern filter, grouped by resource pattern.
async fn describe(
    client: &mut AdminClient,
    (resource_type, name, pattern_type): &Pattern,
) -> Result<BTreeMap<Pattern, BTreeSet<Entry>>, AdminError> {
    let request = DescribeAclsRequest::default()
        .with_resource_type_filter(resource_type.code())
        .with_resource_name_filter(name.as_deref().map(text))
        .with_pattern_type_filter(pattern_type.code())
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(AclOperation::Any.code())
        .with_permission_type(AclPermission::Any.code());
    let (_, response) = client.send(&request).await?;
    check(response.error_code, response.error_message.as_ref())?;
    let mut out: BTreeMap<Pattern, BTreeSet<Entry>> = BTreeMap::new();
    for resource in response.resources {
        let (Some(t), Some(p)) = (
            ResourceType::from_code(resource.resource_type),
            PatternType::from_code(resource.pattern_type),
        ) else {
            continue;
        };
        let acls = out
            .entry((t, Some(resource.resource_name.to_string()), p))
            .or_default();
        for acl in resource.acls {
            if let (Some(op), Some(permission)) = (
                AclOperation::from_code(acl.operation),
                AclPermission::from_code(acl.permission_type),
            ) {
                acls.insert((
                    acl.principal.to_string(),
                    acl.host.to_string(),
                    op,
                    permission,
                ));
            }
        }
    }
    Ok(out)
}

async fn add(
    client: &mut AdminClient,
    args: &AclsArgs,
    out: &mut String,
) -> Result<(), AdminError> {
    let pattern = pattern_type(args);
    if !matches!(pattern, PatternType::Literal | PatternType::Prefixed) {
        usage(&format!(
            "A '--resource-pattern-type' value of '{pattern}' is not valid when adding acls."
        ));
    }
    let wanted = resource_to_entries(args);
    if wanted.values().any(BTreeSet::is_empty) {
        usage(
            "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.",
        );
    }
    for (resource, acls) in wanted {
        let existing = describe(client, &resource).await?;
        let existing = existing.get(&resource);
        let mut new = Vec::new();
        for acl in &acls {
            if existing.is_some_and(|e| e.contains(acl)) {
                out.push_str(&format!(
                    "Acl (pattern={}, entry={}) already exists.\n",
                    pattern_text(&resource),
                    entry_text(acl)
                ));
            } else {
                new.push(acl);
            }
        }
        if new.is_empty() {
            continue;
        }
        let lines: Vec<String> = new.iter().map(|a| format!("\t{}", entry_text(a))).collect();
        out.push_str(&format!(
            "Adding ACLs for resource `{}`: \n {}\n\n",
            pattern_text(&resource),
            lines.join("\n")
        ));
        let (resource_type, name, pattern_type) = &resource;
        let request = CreateAclsRequest::default().with_creations(
            new.iter()
                .map(|(principal, host, operation, permission)| {
                    AclCreation::default()
                        .with_resource_type(resource_type.code())
                        .with_resource_name(text(name.as_deref().unwrap_or_default()))
                        .with_resource_pattern_type(pattern_type.code())
                        .with_principal(text(principal))
                        .with_host(text(host))
                        .with_operation(operation.code())
                        .with_permission_type(permission.code())
                })
                .collect(),
        );
        let (_, response) = client.send(&request).await?;
        for result in &response.results {
            check(result.error_code, result.error_message.as_ref())?;
        }
    }
    Ok(())
}

fn confirm(args: &AclsArgs, question: &str, out: &mut String) -> bool {
    if args.force {
        return true;
    }
    out!("{out}");
    out.clear();
    outln!("{question}");
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    answer.trim().eq_ignore_ascii_case("y")
}

async fn remove(
    client: &mut AdminClient,
    args: &AclsArgs,
    out: &mut String,
) -> Result<(), AdminError> {
    for (filter, acls) in resource_to_entries(args) {
        let question = if acls.is_empty() {
            format!(
                "Are you sure you want to delete all ACLs for resource filter `{}`? (y/n)",
                pattern_text(&filter)
            )
        } else {
            let lines: Vec<String> = acls
                .iter()
                .map(|a| format!("\t{}", entry_text(a)))
                .collect();
            format!(
                "Are you sure you want to remove ACLs: \n {}\n from resource filter `{}`? (y/n)",
                lines.join("\n"),
                pattern_text(&filter)
            )
        };
        if !confirm(args, &question, out) {
            continue;
        }
        let (resource_type, name, pattern_type) = &filter;
        let base = DeleteAclsFilter::default()
            .with_resource_type_filter(resource_type.code())
            .with_resource_name_filter(name.as_deref().map(text))
            .with_pattern_type_filter(pattern_type.code());
        let filters: Vec<DeleteAclsFilter> = if acls.is_empty() {
            vec![base
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(AclOperation::Any.code())
                .with_permission_type(AclPermission::Any.code())]
        } else {
            acls.iter()
                .map(|(principal, host, operation, permission)| {
                    base.clone()
                        .with_principal_filter(Some(text(principal)))
                        .with_host_filter(Some(text(host)))
                        .with_operation(operation.code())
                        .with_permission_type(permission.code())
                })
                .collect()
        };
        let (_, response) = client
            .send(&DeleteAclsRequest::default().with_filters(filters))
            .await?;
        for result in &response.filter_results {
            check(result.error_code, result.error_message.as_ref())?;
        }
    }
    Ok(())
}

fn print_resources(resources: &BTreeMap<Pattern, BTreeSet<Entry>>, out: &mut String) {
    for (resource, acls) in resources {
        let lines: Vec<String> = acls
            .iter()
            .map(|a| format!("\t{}", entry_text(a)))
            .collect();
        out.push_str(&format!(
            "Current ACLs for resource `{}`:\n{}\n\n",
            pattern_text(resource),
            lines.join("\n")
        ));
    }
}

async fn list(
    client: &mut AdminClient,
    args: &AclsArgs,
    out: &mut String,
) -> Result<(), AdminError> {
    let mut filters = resource_filters(args, false);
    if filters.is_empty() {
        filters.insert((ResourceType::Any, None, PatternType::Any));
    }
    let mut resources: BTreeMap<Pattern, BTreeSet<Entry>> = BTreeMap::new();
    for filter in &filters {
        for (resource, acls) in describe(client, filter).await? {
            resources.entry(resource).or_default().extend(acls);
        }
    }
    if args.principal.is_empty() {
        print_resources(&resources, out);
        return Ok(());
    }
    for principal in &args.principal {
        let principal = parse_principal(principal);
        out.push_str(&format!("ACLs for principal `{principal}`\n"));
        let theirs: BTreeMap<Pattern, BTreeSet<Entry>> = resources
            .iter()
            .map(|(resource, acls)| {
                let acls: BTreeSet<Entry> =
                    acls.iter().filter(|a| a.0 == principal).cloned().collect();
                (resource.clone(), acls)
            })
            .filter(|(_, acls)| !acls.is_empty())
            .collect();
        print_resources(&theirs, out);
    }
    Ok(())
}

/// Runs `gregor acls`; `Err` is the message for stderr.
pub fn run_acls(args: AclsArgs) -> Result<(), String> {
    let actions = [args.add, args.remove, args.list]
        .iter()
        .filter(|a| **a)
        .count();
    if actions != 1 {
        usage("Command must include exactly one action: --list, --add, --remove. ");
    }
    if args.list
        && (!args.allow_principal.is_empty()
            || !args.deny_principal.is_empty()
            || !args.allow_host.is_empty()
            || !args.deny_host.is_empty()
            || !args.operation.is_empty()
            || args.producer
            || args.consumer)
    {
        usage("Option \"[list]\" can't be used with option \"[allow-principal]\", \"[deny-principal]\", \"[allow-host]\", \"[deny-host]\", \"[operation]\", \"[producer]\" or \"[consumer]\"");
    }
    if (args.producer || args.consumer) && !args.list && args.topic.is_empty() {
        usage("With --producer or --consumer you must specify a --topic");
    }
    if args.consumer && args.group.is_empty() && !args.producer {
        usage("With --consumer you must specify a --group");
    }
    if args.idempotent && !args.producer {
        usage("Option \"[idempotent]\" can only be used with option \"[producer]\"");
    }
    let config = CommandConfig::load(args.command_config.as_deref()).map_err(|e| e.to_string())?;
    let mut out = String::new();
    let result = block_on(async {
        let mut client = config.connect(&args.bootstrap_server).await?;
        if args.add {
            add(&mut client, &args, &mut out).await
        } else if args.remove {
            remove(&mut client, &args, &mut out).await
        } else {
            list(&mut client, &args, &mut out).await
        }
    })?;
    out!("{out}");
    result.map_err(|e| format!("Error while executing ACL command: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_kafkas() {
        let pattern = (
            ResourceType::Topic,
            Some("orders".to_owned()),
            PatternType::Prefixed,
        );
        assert_eq!(
            pattern_text(&pattern),
            "ResourcePattern(resourceType=TOPIC, name=orders, patternType=PREFIXED)"
        );
        assert_eq!(
            pattern_text(&(ResourceType::Any, None, PatternType::Any)),
            "ResourcePattern(resourceType=ANY, name=<any>, patternType=ANY)"
        );
        let entry = (
            "User:alice".to_owned(),
            "*".to_owned(),
            AclOperation::DescribeConfigs,
            AclPermission::Allow,
        );
        assert_eq!(
            entry_text(&entry),
            "(principal=User:alice, host=*, operation=DESCRIBE_CONFIGS, permissionType=ALLOW)"
        );
        assert_eq!(parse_operation("Read"), Some(AclOperation::Read));
        assert_eq!(
            parse_operation("describeconfigs"),
            Some(AclOperation::DescribeConfigs)
        );
        assert_eq!(
            parse_operation("IDEMPOTENT_WRITE"),
            Some(AclOperation::IdempotentWrite)
        );
        assert_eq!(parse_operation("any"), None);
    }

    #[test]
    fn producer_and_consumer_conveniences_expand_as_kafka() {
        let args = AclsArgs {
            add: true,
            producer: true,
            consumer: true,
            idempotent: true,
            topic: vec!["orders".into()],
            group: vec!["billing".into()],
            allow_principal: vec!["User:alice".into()],
            resource_pattern_type: "LITERAL".into(),
            ..AclsArgs::default()
        };
        let expanded = resource_to_entries(&args);
        let ops = |t: ResourceType, name: &str| -> Vec<AclOperation> {
            expanded
                .get(&(t, Some(name.to_owned()), PatternType::Literal))
                .map(|acls| acls.iter().map(|a| a.2).collect())
                .unwrap_or_default()
        };
        use AclOperation::*;
        assert_eq!(
            ops(ResourceType::Topic, "orders"),
            vec![Read, Write, Create, Describe]
        );
        assert_eq!(ops(ResourceType::Group, "billing"), vec![Read]);
        assert_eq!(
            ops(ResourceType::Cluster, CLUSTER_NAME),
            vec![IdempotentWrite]
        );
    }
}
