//! ACLs: [`AclsImage`] and [`AclsDelta`], Kafka's `AclsImage` together with the lookup index of
//! its `StandardAuthorizerData`. Both live on persistent maps, so a delta of k ACL changes costs
//! O(k log n) and consecutive images share everything else; an authorizer reads an image
//! without locks.
//!
//! The index keeps, per resource type, the LITERAL patterns by name (a hash map: one probe for
//! the name, one for `*`) and the PREFIXED patterns in name order, where the patterns that are
//! prefixes of a name are found by Kafka's walk (see [`AclsImage::find_rule`]): O(log n) per
//! matching prefix, whatever the number of ACLs.

use std::ops::Bound;
use std::sync::Arc;

use uuid::Uuid;

use crate::acl::{
    AclFilter, AclOperation, AclPermission, PatternType, ResourceType, WILDCARD, WILDCARD_PRINCIPAL,
};
use crate::delta::ReplayError;
use crate::records::{AccessControlEntryRecord, MetadataRecord, RemoveAccessControlEntryRecord};

/// One ACL binding, Kafka's `StandardAcl`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StandardAcl {
    /// Resource type (never UNKNOWN or ANY).
    pub resource_type: ResourceType,
    /// Resource name.
    pub resource_name: String,
    /// LITERAL or PREFIXED.
    pub pattern_type: PatternType,
    /// `Type:Name`.
    pub principal: String,
    /// Host address or `*`.
    pub host: String,
    /// Operation (never UNKNOWN or ANY).
    pub operation: AclOperation,
    /// ALLOW or DENY.
    pub permission: AclPermission,
}

impl StandardAcl {
    /// The ACL of a record, if every code in it is one an ACL may carry.
    pub fn from_record(record: &AccessControlEntryRecord) -> Option<Self> {
        let resource_type =
            ResourceType::from_code(record.resource_type).filter(|t| t.is_concrete())?;
        let pattern_type =
            PatternType::from_code(record.pattern_type).filter(|p| p.is_concrete())?;
        let operation = AclOperation::from_code(record.operation).filter(|o| o.is_concrete())?;
        let permission =
            AclPermission::from_code(record.permission_type).filter(|p| p.is_concrete())?;
        Some(StandardAcl {
            resource_type,
            resource_name: record.resource_name.clone(),
            pattern_type,
            principal: record.principal.clone(),
            host: record.host.clone(),
            operation,
            permission,
        })
    }

    /// This ACL as the record that creates it with `id`.
    pub fn to_record(&self, id: Uuid) -> AccessControlEntryRecord {
        AccessControlEntryRecord {
            id,
            resource_type: self.resource_type.code(),
            resource_name: self.resource_name.clone(),
            pattern_type: self.pattern_type.code(),
            principal: self.principal.clone(),
            host: self.host.clone(),
            operation: self.operation.code(),
            permission_type: self.permission.code(),
        }
    }

    /// What this ACL says about `operation` by one of `principals` from `host`, Kafka's
    /// `findResult`: `None` when it does not apply. The resource is matched by the caller.
    fn result(
        &self,
        principal: &str,
        host: &str,
        operation: AclOperation,
    ) -> Option<AclPermission> {
        if self.principal != principal && self.principal != WILDCARD_PRINCIPAL {
            return None;
        }
        if self.host != WILDCARD && self.host != host {
            return None;
        }
        let applies = match self.permission {
            AclPermission::Allow => self.operation.allow_grants(operation),
            _ => self.operation.deny_refuses(operation),
        };
        applies.then_some(self.permission)
    }
}

/// The ACLs of one resource pattern, by id.
type PatternAcls = imbl::OrdMap<Uuid, Arc<StandardAcl>>;

/// LITERAL patterns by name. foldhash rather than SipHash: a probe per check is on every
/// request's path, and the keys are the operators' ACL names (probes cannot grow the map).
type LiteralMap = imbl::GenericHashMap<
    String,
    PatternAcls,
    foldhash::fast::RandomState,
    imbl::shared_ptr::DefaultSharedPtr,
>;

/// The index of one resource type.
#[derive(Clone, Debug, Default)]
struct TypeIndex {
    literal: LiteralMap,
    prefixed: imbl::OrdMap<String, PatternAcls>,
}

impl TypeIndex {
    /// Calls `visit` with the ACLs of each PREFIXED pattern that is a prefix of `name`, longest
    /// first, while it returns true. The greatest pattern not above the candidate is either a
    /// prefix of `name` (it applies; continue below it) or diverges from `name` after `lcp`
    /// characters, and then no prefix of `name` longer than `lcp` can sit between it and the
    /// candidate: O(log n) per matching prefix, never one probe per character of `name`.
    fn prefixes_of<'a>(&'a self, name: &str, mut visit: impl FnMut(&'a PatternAcls) -> bool) {
        let mut candidate = name;
        while let Some((pattern, acls)) = self
            .prefixed
            .range::<_, str>((Bound::Unbounded, Bound::Included(candidate)))
            .next_back()
        {
            if name.starts_with(pattern.as_str()) {
                if !visit(acls) || pattern.is_empty() {
                    break;
                }
                // Every candidate is shorter than the last, so the walk ends.
                let shorter = pattern.char_indices().next_back().map_or(0, |(i, _)| i);
                candidate = &name[..shorter];
            } else {
                candidate = &name[..common_prefix(name, pattern)];
            }
        }
    }
}

/// How ACLs decide one action, before super users and the no-ACL rule are applied (Kafka's
/// `MatchingRule`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AclRule {
    /// A matching DENY.
    Deny,
    /// A matching ALLOW and no matching DENY.
    Allow,
    /// ACLs exist on the resource, none applies to this principal, host and operation.
    NoMatch,
    /// No ACL at all on the resource (for any principal): `allow.everyone.if.no.acl.found`
    /// decides.
    NoAcls,
}

/// Every ACL, by id, with the authorizer's index; see the module docs.
#[derive(Clone, Debug, Default)]
pub struct AclsImage {
    by_id: imbl::OrdMap<Uuid, Arc<StandardAcl>>,
    /// Per resource type code (0..=7).
    index: [TypeIndex; 8],
}

impl PartialEq for AclsImage {
    fn eq(&self, other: &Self) -> bool {
        // The index is derived from the ACLs.
        self.by_id == other.by_id
    }
}

/// The accumulated decision of a scan (Kafka's `MatchingRuleBuilder`).
#[derive(Default)]
struct Found {
    allow: bool,
    deny: bool,
    resource_acls: bool,
}

impl Found {
    fn scan(&mut self, acls: &PatternAcls, principal: &str, host: &str, operation: AclOperation) {
        self.resource_acls |= !acls.is_empty();
        for acl in acls.values() {
            match acl.result(principal, host, operation) {
                Some(AclPermission::Deny) => {
                    self.deny = true;
                    return;
                }
                Some(_) => self.allow = true,
                None => {}
            }
        }
    }
}

/// The length in bytes of the longest common prefix of `a` and `b` that ends on a character
/// boundary of both.
fn common_prefix(a: &str, b: &str) -> usize {
    let mut length = 0;
    for ((i, x), y) in a.char_indices().zip(b.chars()) {
        if x != y {
            return i;
        }
        length = i + x.len_utf8();
    }
    length
}

impl AclsImage {
    /// Whether no ACL exists.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// How many ACLs exist.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// The ACL with `id`.
    pub fn get(&self, id: &Uuid) -> Option<&StandardAcl> {
        self.by_id.get(id).map(|acl| &**acl)
    }

    /// Every (id, ACL), by id.
    pub fn iter(&self) -> impl Iterator<Item = (&Uuid, &StandardAcl)> {
        self.by_id.iter().map(|(id, acl)| (id, &**acl))
    }

    /// Whether an ACL equal to `acl` exists (Kafka's `existingAcls`). O(log n + ACLs of that
    /// resource pattern).
    pub fn contains(&self, acl: &StandardAcl) -> bool {
        let Some(index) = self.index.get(acl.resource_type.code() as usize) else {
            return false;
        };
        let pattern = match acl.pattern_type {
            PatternType::Literal => index.literal.get(&acl.resource_name),
            _ => index.prefixed.get(&acl.resource_name),
        };
        pattern.is_some_and(|acls| acls.values().any(|a| **a == *acl))
    }

    /// The ACLs `filter` matches, by id (the order of [`iter`](Self::iter)). A filter that
    /// names a resource reads that name's patterns from the index (with MATCH also the LITERAL
    /// `*` and the PREFIXED prefixes of the name), so a DeleteAcls of many named filters costs
    /// O(log n) per filter and match rather than a scan of every ACL per filter; a filter
    /// without a name scans. Every candidate is checked with `filter.matches`, so the index
    /// only narrows the search.
    pub fn matching<'a>(&'a self, filter: &AclFilter) -> Vec<(&'a Uuid, &'a StandardAcl)> {
        let Some(name) = filter.name.as_deref() else {
            return self.iter().filter(|(_, acl)| filter.matches(acl)).collect();
        };
        let indexes: &'a [TypeIndex] = match filter.resource_type {
            ResourceType::Any => &self.index,
            resource_type => {
                let at = resource_type.code() as usize;
                self.index.get(at..=at).unwrap_or_default()
            }
        };
        let mut found: Vec<(&'a Uuid, &'a StandardAcl)> = Vec::new();
        for index in indexes {
            let mut take = |acls: Option<&'a PatternAcls>| {
                let matched = acls.into_iter().flat_map(|acls| acls.iter());
                found.extend(
                    matched
                        .map(|(id, acl)| (id, &**acl))
                        .filter(|(_, acl)| filter.matches(acl)),
                );
            };
            match filter.pattern_type {
                PatternType::Literal => take(index.literal.get(name)),
                PatternType::Prefixed => take(index.prefixed.get(name)),
                PatternType::Any => {
                    take(index.literal.get(name));
                    take(index.prefixed.get(name));
                }
                _ => {
                    take(index.literal.get(name));
                    if name != WILDCARD {
                        take(index.literal.get(WILDCARD));
                    }
                    index.prefixes_of(name, |acls| {
                        take(Some(acls));
                        true
                    });
                }
            }
        }
        found.sort_unstable_by_key(|(id, _)| **id);
        found
    }

    /// Kafka's `StandardAuthorizerData.findAclRule` for `principal` (`Type:Name`) from `host`
    /// doing `operation` on the resource `resource_type`/`name`: the ACLs with that exact
    /// name, the PREFIXED ones whose name is a prefix of it, and the LITERAL `*` ones apply;
    /// the first applicable DENY decides.
    pub fn find_rule(
        &self,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> AclRule {
        let Some(index) = self.index.get(resource_type.code() as usize) else {
            return AclRule::NoAcls;
        };
        let mut found = Found::default();
        if let Some(acls) = index.literal.get(name) {
            found.scan(acls, principal, host, operation);
        }
        if !found.deny {
            index.prefixes_of(name, |acls| {
                found.scan(acls, principal, host, operation);
                !found.deny
            });
        }
        if !found.deny && name != WILDCARD {
            if let Some(acls) = index.literal.get(WILDCARD) {
                found.scan(acls, principal, host, operation);
            }
        }
        if found.deny {
            AclRule::Deny
        } else if found.allow {
            AclRule::Allow
        } else if found.resource_acls {
            AclRule::NoMatch
        } else {
            AclRule::NoAcls
        }
    }

    /// Kafka's `authorizeByResourceType` ACL part: whether `principal` from `host` may do
    /// `operation` on at least one resource of `resource_type` (KIP-679: WRITE on any topic
    /// for an idempotent producer). A LITERAL `*` DENY refuses; otherwise an applicable ALLOW
    /// pattern not covered by an applicable DENY (same or shorter prefix) grants.
    pub fn allows_any(
        &self,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        let Some(index) = self.index.get(resource_type.code() as usize) else {
            return false;
        };
        let applies = |acls: &PatternAcls, permission: AclPermission| {
            acls.values()
                .any(|acl| acl.result(principal, host, operation) == Some(permission))
        };
        if index
            .literal
            .get(WILDCARD)
            .is_some_and(|acls| applies(acls, AclPermission::Deny))
        {
            return false;
        }
        let denied_prefixes: Vec<&str> = index
            .prefixed
            .iter()
            .filter(|(_, acls)| applies(acls, AclPermission::Deny))
            .map(|(name, _)| name.as_str())
            .collect();
        let covered = |name: &str| denied_prefixes.iter().any(|p| name.starts_with(p));
        let denied_literals = |name: &String| {
            index
                .literal
                .get(name)
                .is_some_and(|acls| applies(acls, AclPermission::Deny))
        };
        index.literal.iter().any(|(name, acls)| {
            applies(acls, AclPermission::Allow) && !covered(name) && !denied_literals(name)
        }) || index
            .prefixed
            .iter()
            .any(|(name, acls)| applies(acls, AclPermission::Allow) && !covered(name))
    }

    /// The image as records, one `AccessControlEntryRecord` per ACL, by id.
    pub fn to_records(&self, out: &mut Vec<MetadataRecord>) {
        out.extend(
            self.by_id
                .iter()
                .map(|(id, acl)| MetadataRecord::AccessControlEntry(acl.to_record(*id))),
        );
    }

    fn insert(&mut self, id: Uuid, acl: Arc<StandardAcl>) {
        if let Some(index) = self.index.get_mut(acl.resource_type.code() as usize) {
            let patterns = match acl.pattern_type {
                PatternType::Literal => index.literal.entry(acl.resource_name.clone()).or_default(),
                _ => index.prefixed.entry(acl.resource_name.clone()).or_default(),
            };
            patterns.insert(id, Arc::clone(&acl));
        }
        self.by_id.insert(id, acl);
    }

    fn remove(&mut self, id: &Uuid) -> Option<Arc<StandardAcl>> {
        let acl = self.by_id.remove(id)?;
        if let Some(index) = self.index.get_mut(acl.resource_type.code() as usize) {
            match acl.pattern_type {
                PatternType::Literal => {
                    if let Some(patterns) = index.literal.get_mut(&acl.resource_name) {
                        patterns.remove(id);
                        if patterns.is_empty() {
                            index.literal.remove(&acl.resource_name);
                        }
                    }
                }
                _ => {
                    if let Some(patterns) = index.prefixed.get_mut(&acl.resource_name) {
                        patterns.remove(id);
                        if patterns.is_empty() {
                            index.prefixed.remove(&acl.resource_name);
                        }
                    }
                }
            }
        }
        Some(acl)
    }
}

/// ACL changes of one delta: the next image, and the ids it changed (for the digest).
#[derive(Clone, Debug)]
pub struct AclsDelta {
    next: AclsImage,
    changed: std::collections::BTreeSet<Uuid>,
}

impl AclsDelta {
    /// An empty delta on `base` (an O(1) copy of its maps).
    pub fn new(base: &Arc<AclsImage>) -> Self {
        AclsDelta {
            next: AclsImage::clone(base),
            changed: Default::default(),
        }
    }

    /// The delta from the empty image to `image`.
    pub fn from_image(image: &AclsImage) -> Self {
        AclsDelta {
            next: image.clone(),
            changed: image.by_id.keys().copied().collect(),
        }
    }

    /// Adds an ACL. Refused: a code an ACL may not carry, an id already in use.
    pub fn replay_add(&mut self, record: &AccessControlEntryRecord) -> Result<(), ReplayError> {
        let acl =
            StandardAcl::from_record(record).ok_or(ReplayError::InvalidAcl { id: record.id })?;
        if self.next.by_id.contains_key(&record.id) {
            return Err(ReplayError::DuplicateAclId { id: record.id });
        }
        self.next.insert(record.id, Arc::new(acl));
        self.changed.insert(record.id);
        Ok(())
    }

    /// Removes an ACL. Refused: an unknown id (Kafka's replay fails the same way).
    pub fn replay_remove(
        &mut self,
        record: &RemoveAccessControlEntryRecord,
    ) -> Result<(), ReplayError> {
        self.next
            .remove(&record.id)
            .ok_or(ReplayError::UnknownAclId { id: record.id })?;
        self.changed.insert(record.id);
        Ok(())
    }

    /// The ids this delta added or removed.
    pub fn changed_ids(&self) -> impl Iterator<Item = &Uuid> {
        self.changed.iter()
    }

    /// The next image.
    pub fn apply(&self) -> AclsImage {
        self.next.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AclOperation::*;
    use AclPermission::*;

    #[allow(clippy::too_many_arguments)]
    fn record(
        id: u128,
        resource_type: ResourceType,
        name: &str,
        pattern: PatternType,
        principal: &str,
        host: &str,
        operation: AclOperation,
        permission: AclPermission,
    ) -> AccessControlEntryRecord {
        AccessControlEntryRecord {
            id: Uuid::from_u128(id),
            resource_type: resource_type.code(),
            resource_name: name.into(),
            pattern_type: pattern.code(),
            principal: principal.into(),
            host: host.into(),
            operation: operation.code(),
            permission_type: permission.code(),
        }
    }

    fn image(records: &[AccessControlEntryRecord]) -> Result<AclsImage, ReplayError> {
        let mut delta = AclsDelta::new(&Arc::new(AclsImage::default()));
        for r in records {
            delta.replay_add(r)?;
        }
        Ok(delta.apply())
    }

    const T: ResourceType = ResourceType::Topic;
    const L: PatternType = PatternType::Literal;
    const P: PatternType = PatternType::Prefixed;

    #[test]
    fn literal_prefixed_and_wildcard_patterns_apply_as_in_kafka() -> Result<(), ReplayError> {
        let acls = image(&[
            record(1, T, "foobar", L, "User:alice", "*", Read, Allow),
            record(2, T, "foo", P, "User:bob", "*", Write, Allow),
            record(3, T, "foob", L, "User:carol", "*", Read, Allow),
            record(4, T, "f", P, "User:carol", "*", Describe, Allow),
            record(5, T, "*", L, "User:dave", "*", Read, Allow),
            record(6, T, "gar", P, "User:bob", "*", Read, Allow),
            record(7, T, "fa", P, "User:erin", "*", Read, Allow),
        ])?;
        let rule =
            |principal: &str, op, name: &str| acls.find_rule(principal, "10.0.0.1", op, T, name);
        assert_eq!(rule("User:alice", Read, "foobar"), AclRule::Allow);
        assert_eq!(
            rule("User:alice", Describe, "foobar"),
            AclRule::Allow,
            "READ implies DESCRIBE"
        );
        assert_eq!(rule("User:alice", Write, "foobar"), AclRule::NoMatch);
        assert_eq!(
            rule("User:bob", Write, "foobar"),
            AclRule::Allow,
            "prefix foo"
        );
        assert_eq!(
            rule("User:bob", Write, "foo"),
            AclRule::Allow,
            "prefix equal to the name"
        );
        assert_eq!(rule("User:bob", Write, "fo"), AclRule::NoMatch);
        // A LITERAL whose name is a proper prefix does not apply.
        assert_eq!(rule("User:carol", Read, "foobar"), AclRule::NoMatch);
        assert_eq!(
            rule("User:carol", Describe, "fzz"),
            AclRule::Allow,
            "prefix f after a jump"
        );
        assert_eq!(rule("User:erin", Read, "fab"), AclRule::Allow);
        assert_eq!(
            rule("User:dave", Read, "anything"),
            AclRule::Allow,
            "wildcard"
        );
        assert_eq!(rule("User:bob", Read, "garage"), AclRule::Allow);
        assert_eq!(
            rule("User:alice", Read, "zzz"),
            AclRule::NoMatch,
            "only the wildcard ACL"
        );
        let without_wildcard = image(&[record(1, T, "foo", P, "User:bob", "*", Write, Allow)])?;
        assert_eq!(
            without_wildcard.find_rule("User:bob", "h", Write, T, "bar"),
            AclRule::NoAcls
        );
        assert_eq!(
            without_wildcard.find_rule("User:bob", "h", Write, ResourceType::Group, "foo"),
            AclRule::NoAcls
        );
        Ok(())
    }

    #[test]
    fn deny_wins_and_does_not_imply() -> Result<(), ReplayError> {
        let acls = image(&[
            record(1, T, "orders", P, "User:*", "*", All, Allow),
            record(2, T, "orders-eu", L, "User:alice", "*", Read, Deny),
            record(3, T, "orders", L, "User:bob", "10.0.0.9", Write, Deny),
        ])?;
        let rule = |principal: &str, host: &str, op, name: &str| {
            acls.find_rule(principal, host, op, T, name)
        };
        assert_eq!(
            rule("User:alice", "1.1.1.1", Read, "orders-eu"),
            AclRule::Deny
        );
        assert_eq!(
            rule("User:alice", "1.1.1.1", Describe, "orders-eu"),
            AclRule::Allow
        );
        assert_eq!(
            rule("User:alice", "1.1.1.1", Read, "orders-us"),
            AclRule::Allow
        );
        assert_eq!(rule("User:bob", "10.0.0.9", Write, "orders"), AclRule::Deny);
        assert_eq!(
            rule("User:bob", "10.0.0.8", Write, "orders"),
            AclRule::Allow,
            "host"
        );
        // Kafka's matching principals are the principal and `User:*`, whatever the type.
        assert_eq!(rule("Group:x", "1.1.1.1", Read, "orders"), AclRule::Allow);
        let typed = image(&[record(1, T, "t", L, "Group:*", "*", Read, Allow)])?;
        assert_eq!(
            typed.find_rule("Group:x", "h", Read, T, "t"),
            AclRule::NoMatch
        );
        Ok(())
    }

    #[test]
    fn unicode_names_walk_on_character_boundaries() -> Result<(), ReplayError> {
        let acls = image(&[
            record(1, T, "é", P, "User:a", "*", Read, Allow),
            record(2, T, "éz", P, "User:b", "*", Read, Allow),
            record(3, T, "a", P, "User:c", "*", Read, Allow),
        ])?;
        assert_eq!(acls.find_rule("User:a", "h", Read, T, "éa"), AclRule::Allow);
        assert_eq!(
            acls.find_rule("User:b", "h", Read, T, "éa"),
            AclRule::NoMatch
        );
        assert_eq!(acls.find_rule("User:c", "h", Read, T, "ab"), AclRule::Allow);
        assert_eq!(
            acls.find_rule("User:c", "h", Read, T, "ébb"),
            AclRule::NoMatch
        );
        Ok(())
    }

    /// The rule by brute force over every ACL: the reference the index must agree with.
    fn reference_rule(
        acls: &[AccessControlEntryRecord],
        principal: &str,
        operation: AclOperation,
        name: &str,
    ) -> AclRule {
        let (mut allow, mut deny, mut any) = (false, false, false);
        for acl in acls.iter().filter_map(StandardAcl::from_record) {
            let applies = acl.resource_type == T
                && match acl.pattern_type {
                    PatternType::Literal => {
                        acl.resource_name == name || acl.resource_name == WILDCARD
                    }
                    _ => name.starts_with(&acl.resource_name),
                };
            if !applies {
                continue;
            }
            any = true;
            match acl.result(principal, "h", operation) {
                Some(AclPermission::Deny) => deny = true,
                Some(_) => allow = true,
                None => {}
            }
        }
        match (deny, allow, any) {
            (true, ..) => AclRule::Deny,
            (_, true, _) => AclRule::Allow,
            (_, _, true) => AclRule::NoMatch,
            _ => AclRule::NoAcls,
        }
    }

    proptest::proptest! {
        #[test]
        fn the_index_agrees_with_brute_force(
            acls in proptest::collection::vec(
                ("[abé]{1,4}", proptest::bool::ANY, 0usize..3, 0usize..3, proptest::bool::ANY),
                0..40,
            ),
            names in proptest::collection::vec("[abé]{1,5}", 1..8),
        ) {
            let principals = ["User:x", "User:y", "User:*"];
            let operations = [Read, Write, All];
            let records: Vec<AccessControlEntryRecord> = acls
                .iter()
                .enumerate()
                .map(|(i, (name, prefixed, who, op, allow))| {
                    record(
                        i as u128 + 1,
                        T,
                        if *prefixed || name != "a" { name } else { "*" },
                        if *prefixed { P } else { L },
                        principals[*who],
                        "*",
                        operations[*op],
                        if *allow { Allow } else { Deny },
                    )
                })
                .collect();
            let index = image(&records).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
            for name in &names {
                for principal in ["User:x", "User:y"] {
                    for operation in [Read, Write, Describe] {
                        proptest::prop_assert_eq!(
                            index.find_rule(principal, "h", operation, T, name),
                            reference_rule(&records, principal, operation, name),
                            "{} {} {}", name, principal, operation
                        );
                    }
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn indexed_filters_match_what_a_scan_matches(
            acls in proptest::collection::vec(
                ("[abé*]{0,4}", proptest::bool::ANY, proptest::bool::ANY, 0usize..2),
                0..40,
            ),
            filters in proptest::collection::vec(
                (proptest::option::of("[abé*]{0,5}"), 0i8..5, 1i8..5, proptest::option::of(0usize..2)),
                1..12,
            ),
        ) {
            let principals = ["User:x", "User:y"];
            let records: Vec<AccessControlEntryRecord> = acls
                .iter()
                .enumerate()
                .map(|(i, (name, group, prefixed, who))| {
                    record(
                        i as u128 + 1,
                        if *group { ResourceType::Group } else { T },
                        name,
                        if *prefixed { P } else { L },
                        principals[*who],
                        "*",
                        Read,
                        Allow,
                    )
                })
                .collect();
            let index = image(&records).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
            for (name, pattern, resource_type, who) in &filters {
                // Types ANY, TOPIC and GROUP (and UNKNOWN, refused as a filter); every pattern
                // type a filter may have.
                let resource_type = [0, 1, 2, 3, 3][*resource_type as usize];
                let Some(filter) = AclFilter::from_codes(
                    resource_type,
                    name.as_deref(),
                    *pattern,
                    who.map(|who| principals[who]),
                    None,
                    1,
                    1,
                ) else {
                    continue;
                };
                let scanned: Vec<_> = index.iter().filter(|(_, acl)| filter.matches(acl)).collect();
                proptest::prop_assert_eq!(index.matching(&filter), scanned, "{:?}", filter);
            }
        }
    }

    #[test]
    fn allows_any_follows_authorize_by_resource_type() -> Result<(), ReplayError> {
        let acls = image(&[
            record(1, T, "orders", P, "User:alice", "*", Write, Allow),
            record(2, T, "ord", P, "User:alice", "*", Write, Deny),
            record(3, T, "logs", L, "User:bob", "*", Write, Allow),
            record(4, T, "*", L, "User:carol", "*", Write, Deny),
            record(5, T, "x", L, "User:carol", "*", Write, Allow),
        ])?;
        assert!(
            !acls.allows_any("User:alice", "h", Write, T),
            "covered by a shorter DENY"
        );
        assert!(acls.allows_any("User:bob", "h", Write, T));
        assert!(
            acls.allows_any("User:bob", "h", Describe, T),
            "WRITE implies DESCRIBE"
        );
        assert!(
            !acls.allows_any("User:carol", "h", Write, T),
            "wildcard DENY"
        );
        assert!(!acls.allows_any("User:dave", "h", Write, T));
        Ok(())
    }

    #[test]
    fn replay_validates_and_removal_updates_the_index() -> Result<(), ReplayError> {
        let base = Arc::new(image(&[
            record(1, T, "a", L, "User:x", "*", Read, Allow),
            record(2, T, "a", L, "User:y", "*", Read, Allow),
        ])?);
        assert!(base.contains(&StandardAcl {
            resource_type: T,
            resource_name: "a".into(),
            pattern_type: L,
            principal: "User:y".into(),
            host: "*".into(),
            operation: Read,
            permission: Allow,
        }));
        let mut delta = AclsDelta::new(&base);
        assert!(matches!(
            delta.replay_add(&record(1, T, "b", L, "User:x", "*", Read, Allow)),
            Err(ReplayError::DuplicateAclId { .. })
        ));
        let mut bad = record(9, T, "b", L, "User:x", "*", Read, Allow);
        bad.operation = AclOperation::Any.code();
        assert!(matches!(
            delta.replay_add(&bad),
            Err(ReplayError::InvalidAcl { .. })
        ));
        assert!(matches!(
            delta.replay_remove(&RemoveAccessControlEntryRecord {
                id: Uuid::from_u128(7)
            }),
            Err(ReplayError::UnknownAclId { .. })
        ));
        delta.replay_remove(&RemoveAccessControlEntryRecord {
            id: Uuid::from_u128(1),
        })?;
        let next = delta.apply();
        assert_eq!(next.len(), 1);
        assert_eq!(
            next.find_rule("User:x", "h", Read, T, "a"),
            AclRule::NoMatch
        );
        assert_eq!(
            base.find_rule("User:x", "h", Read, T, "a"),
            AclRule::Allow,
            "base unchanged"
        );
        let mut delta = AclsDelta::new(&Arc::new(next));
        delta.replay_remove(&RemoveAccessControlEntryRecord {
            id: Uuid::from_u128(2),
        })?;
        let empty = delta.apply();
        assert!(empty.is_empty());
        assert_eq!(
            empty.find_rule("User:y", "h", Read, T, "a"),
            AclRule::NoAcls
        );
        assert_eq!(delta.changed_ids().count(), 1);
        Ok(())
    }
}
