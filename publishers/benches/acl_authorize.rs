//! Cost of one authorization check against 10 / 1,000 / 10,000 ACLs: what the authorizer does
//! per action (`gregor_actors::authorizer::Authorizer::authorize`): load the published ACLs
//! from an `ArcSwap`, look the principal up among the super users, and ask the image's index
//! (`AclsImage::find_rule`).
//!
//! Run: `cargo bench -p gregor-publishers --bench acl_authorize`
//!
//! The ACLs are a mix shaped like a multi-tenant cluster: per tenant i, a LITERAL READ on topic
//! `events-i` for `User:user-i`, a PREFIXED WRITE on `team-i-` for `User:user-i`, a LITERAL
//! READ on group `group-i`, and every tenth tenant a DENY WRITE on `team-i-secret`; plus a
//! wildcard READ for `User:auditor`. Checks: a literal hit, a prefixed hit on a long name, a
//! DENY, and a miss (no ACL applies: every applicable section is scanned).

use std::collections::HashSet;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use criterion::{BenchmarkId, Criterion};
use gregor_publishers::acl::{AclOperation, AclPermission, PatternType, ResourceType};
use gregor_publishers::image::{AclRule, AclsImage};
use gregor_publishers::records::AccessControlEntryRecord;
use gregor_publishers::{MetadataDelta, MetadataImage, MetadataRecord, Provenance};
use uuid::Uuid;

fn acls(count: usize) -> Arc<AclsImage> {
    let mut records = Vec::with_capacity(count);
    let push = |records: &mut Vec<MetadataRecord>,
                resource_type: ResourceType,
                name: String,
                pattern: PatternType,
                principal: String,
                operation: AclOperation,
                permission: AclPermission| {
        let id = Uuid::from_u128(records.len() as u128 + 1);
        records.push(MetadataRecord::AccessControlEntry(
            AccessControlEntryRecord {
                id,
                resource_type: resource_type.code(),
                resource_name: name,
                pattern_type: pattern.code(),
                principal,
                host: "*".into(),
                operation: operation.code(),
                permission_type: permission.code(),
            },
        ));
    };
    push(
        &mut records,
        ResourceType::Topic,
        "*".into(),
        PatternType::Literal,
        "User:auditor".into(),
        AclOperation::Read,
        AclPermission::Allow,
    );
    let mut tenant = 0;
    while records.len() < count {
        let user = format!("User:user-{tenant}");
        let entries = [
            (
                ResourceType::Topic,
                format!("events-{tenant}"),
                PatternType::Literal,
                AclOperation::Read,
                AclPermission::Allow,
            ),
            (
                ResourceType::Topic,
                format!("team-{tenant}-"),
                PatternType::Prefixed,
                AclOperation::Write,
                AclPermission::Allow,
            ),
            (
                ResourceType::Group,
                format!("group-{tenant}"),
                PatternType::Literal,
                AclOperation::Read,
                AclPermission::Allow,
            ),
            (
                ResourceType::Topic,
                format!("team-{tenant}-secret"),
                PatternType::Literal,
                AclOperation::Write,
                AclPermission::Deny,
            ),
        ];
        for (i, (t, name, pattern, op, permission)) in entries.into_iter().enumerate() {
            if records.len() >= count || (i == 3 && tenant % 10 != 0) {
                continue;
            }
            push(&mut records, t, name, pattern, user.clone(), op, permission);
        }
        tenant += 1;
    }
    let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
    if let Err(error) = delta.replay_all(&records) {
        panic!("bench ACLs do not replay: {error}");
    }
    Arc::clone(&delta.apply(Provenance::default()).acls)
}

/// The authorizer's per-action work.
fn authorize(
    published: &ArcSwap<AclsImage>,
    super_users: &HashSet<String>,
    principal: &str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: &str,
) -> bool {
    if super_users.contains(principal) {
        return true;
    }
    matches!(
        published
            .load()
            .find_rule(principal, "10.1.2.3", operation, resource_type, name),
        AclRule::Allow
    )
}

fn main() {
    let mut criterion = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .configure_from_args();
    let super_users: HashSet<String> = ["User:admin".to_owned()].into_iter().collect();
    let mut group = criterion.benchmark_group("acl_authorize");
    for count in [10usize, 1_000, 10_000] {
        let published = ArcSwap::new(acls(count));
        // Tenant 0 exists at every size (10 ACLs hold tenants 0-2).
        let cases: [(&str, &str, AclOperation, ResourceType, &str, bool); 4] = [
            (
                "literal_hit",
                "User:user-0",
                AclOperation::Read,
                ResourceType::Topic,
                "events-0",
                true,
            ),
            (
                "prefixed_hit",
                "User:user-0",
                AclOperation::Write,
                ResourceType::Topic,
                "team-0-payments-eu-west-1-orders-v2",
                true,
            ),
            (
                "deny",
                "User:user-0",
                AclOperation::Write,
                ResourceType::Topic,
                "team-0-secret",
                false,
            ),
            (
                "miss",
                "User:nobody",
                AclOperation::Write,
                ResourceType::Topic,
                "team-1-payments",
                false,
            ),
        ];
        for (case, principal, op, t, name, expected) in cases {
            assert_eq!(
                authorize(&published, &super_users, principal, op, t, name),
                expected,
                "{case} at {count} ACLs"
            );
            group.bench_with_input(BenchmarkId::new(case, count), &count, |b, _| {
                b.iter(|| {
                    authorize(
                        &published,
                        &super_users,
                        black_box(principal),
                        op,
                        t,
                        black_box(name),
                    )
                })
            });
        }
    }
    group.finish();
    criterion.final_summary();
}
