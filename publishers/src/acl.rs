//! Kafka's ACL model (`org.apache.kafka.common.acl` and `.resource`): resource types, pattern
//! types, operations and permission types with Kafka's codes and names, and which operations an
//! ALLOW implies. The ACLs themselves live in [`crate::image::AclsImage`].

/// Defines a Kafka enum with its wire codes and its upper-case names.
macro_rules! kafka_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $code:literal, $text:literal;)+ }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl $name {
            /// Every value, in code order.
            pub const ALL_VALUES: &'static [$name] = &[$($name::$variant,)+];

            /// The value with Kafka's code `code`.
            pub fn from_code(code: i8) -> Option<Self> {
                match code {
                    $($code => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// Kafka's code.
            pub fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code,)+
                }
            }

            /// Kafka's name (`toString`), e.g. `TRANSACTIONAL_ID`.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The value named `text`, case-insensitively (Kafka's `fromString`).
            pub fn from_name(text: &str) -> Option<Self> {
                $(if text.eq_ignore_ascii_case($text) {
                    return Some($name::$variant);
                })+
                None
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

kafka_enum!(
    /// Kafka's `ResourceType`.
    ResourceType {
        /// Not a valid type (parse failure).
        Unknown = 0, "UNKNOWN";
        /// Filters only: any type.
        Any = 1, "ANY";
        /// A topic.
        Topic = 2, "TOPIC";
        /// A consumer group.
        Group = 3, "GROUP";
        /// The cluster (name `kafka-cluster`).
        Cluster = 4, "CLUSTER";
        /// A transactional id.
        TransactionalId = 5, "TRANSACTIONAL_ID";
        /// A delegation token.
        DelegationToken = 6, "DELEGATION_TOKEN";
        /// A user (delegation tokens on behalf of others).
        User = 7, "USER";
    }
);

kafka_enum!(
    /// Kafka's `PatternType`.
    PatternType {
        /// Not a valid pattern type.
        Unknown = 0, "UNKNOWN";
        /// Filters only: any pattern type, exact name.
        Any = 1, "ANY";
        /// Filters only: every ACL that applies to the named resource.
        Match = 2, "MATCH";
        /// The name is the resource's name (`*`: every resource of the type).
        Literal = 3, "LITERAL";
        /// The name is a prefix of the resources' names.
        Prefixed = 4, "PREFIXED";
    }
);

kafka_enum!(
    /// Kafka's `AclOperation`.
    AclOperation {
        /// Not a valid operation.
        Unknown = 0, "UNKNOWN";
        /// Filters only: any operation.
        Any = 1, "ANY";
        /// Every operation.
        All = 2, "ALL";
        /// Read.
        Read = 3, "READ";
        /// Write.
        Write = 4, "WRITE";
        /// Create.
        Create = 5, "CREATE";
        /// Delete.
        Delete = 6, "DELETE";
        /// Alter.
        Alter = 7, "ALTER";
        /// Describe.
        Describe = 8, "DESCRIBE";
        /// Inter-broker actions.
        ClusterAction = 9, "CLUSTER_ACTION";
        /// Describe configs.
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        /// Alter configs.
        AlterConfigs = 11, "ALTER_CONFIGS";
        /// Idempotent produce.
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        /// Create delegation tokens.
        CreateTokens = 13, "CREATE_TOKENS";
        /// Describe delegation tokens.
        DescribeTokens = 14, "DESCRIBE_TOKENS";
    }
);

kafka_enum!(
    /// Kafka's `AclPermissionType`.
    AclPermission {
        /// Not a valid permission type.
        Unknown = 0, "UNKNOWN";
        /// Filters only: either.
        Any = 1, "ANY";
        /// Deny.
        Deny = 2, "DENY";
        /// Allow.
        Allow = 3, "ALLOW";
    }
);

/// The cluster resource's only name.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// The resource name (with LITERAL) and host that match everything.
pub const WILDCARD: &str = "*";

/// The principal that matches every principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

impl ResourceType {
    /// Whether an ACL may name this type (not UNKNOWN or ANY).
    pub fn is_concrete(self) -> bool {
        !matches!(self, ResourceType::Unknown | ResourceType::Any)
    }

    /// The operations that apply to resources of this type (Kafka's `AclEntry.supportedOperations`),
    /// the bits of the KIP-430 authorized-operations fields.
    pub fn supported_operations(self) -> &'static [AclOperation] {
        use AclOperation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
            ResourceType::Unknown | ResourceType::Any => &[],
        }
    }

    /// The error code a denied action on this type answers (Kafka's `AclEntry` /
    /// `ApiError.fromThrowable` of the type's authorization exception).
    pub fn authorization_error_code(self) -> i16 {
        match self {
            ResourceType::Topic => 29,
            ResourceType::Group => 30,
            ResourceType::TransactionalId => 53,
            ResourceType::DelegationToken => 65,
            _ => 31,
        }
    }
}

impl AclOperation {
    /// Whether an ACL may carry this operation (not UNKNOWN or ANY).
    pub fn is_concrete(self) -> bool {
        !matches!(self, AclOperation::Unknown | AclOperation::Any)
    }

    /// Whether an ALLOW of `self` grants `requested`: the same operation, ALL, or an operation
    /// that implies it (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
    /// DESCRIBE_CONFIGS).
    pub fn allow_grants(self, requested: AclOperation) -> bool {
        use AclOperation::*;
        self == All
            || self == requested
            || match requested {
                Describe => matches!(self, Read | Write | Delete | Alter),
                DescribeConfigs => self == AlterConfigs,
                _ => false,
            }
    }

    /// Whether a DENY of `self` refuses `requested`: only the operation itself or ALL (a DENY
    /// READ does not deny DESCRIBE).
    pub fn deny_refuses(self, requested: AclOperation) -> bool {
        self == AclOperation::All || self == requested
    }
}

impl PatternType {
    /// Whether an ACL may carry this pattern type (LITERAL or PREFIXED).
    pub fn is_concrete(self) -> bool {
        matches!(self, PatternType::Literal | PatternType::Prefixed)
    }
}

impl AclPermission {
    /// Whether an ACL may carry this permission (ALLOW or DENY).
    pub fn is_concrete(self) -> bool {
        matches!(self, AclPermission::Allow | AclPermission::Deny)
    }
}

/// The KIP-430 bit of `operation` in an authorized-operations field.
pub fn operation_bit(operation: AclOperation) -> i32 {
    1i32 << operation.code()
}

/// Kafka's `AclBindingFilter`: which ACLs DescribeAcls and DeleteAcls select. `None` fields
/// match anything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclFilter {
    /// A type, or ANY.
    pub resource_type: ResourceType,
    /// The resource name.
    pub name: Option<String>,
    /// LITERAL or PREFIXED (that pattern, that exact name), ANY (any pattern, exact name) or
    /// MATCH (every ACL that applies to the named resource).
    pub pattern_type: PatternType,
    /// The principal, compared as a string.
    pub principal: Option<String>,
    /// The host, compared as a string.
    pub host: Option<String>,
    /// An operation, or ANY.
    pub operation: AclOperation,
    /// A permission, or ANY.
    pub permission: AclPermission,
}

impl AclFilter {
    /// The filter of a request's codes; `None` when a code is UNKNOWN or not a code at all
    /// (Kafka refuses such a filter when it parses the request).
    #[allow(clippy::too_many_arguments)]
    pub fn from_codes(
        resource_type: i8,
        name: Option<&str>,
        pattern_type: i8,
        principal: Option<&str>,
        host: Option<&str>,
        operation: i8,
        permission: i8,
    ) -> Option<Self> {
        Some(AclFilter {
            resource_type: ResourceType::from_code(resource_type)
                .filter(|t| *t != ResourceType::Unknown)?,
            name: name.map(str::to_owned),
            pattern_type: PatternType::from_code(pattern_type)
                .filter(|p| *p != PatternType::Unknown)?,
            principal: principal.map(str::to_owned),
            host: host.map(str::to_owned),
            operation: AclOperation::from_code(operation)
                .filter(|o| *o != AclOperation::Unknown)?,
            permission: AclPermission::from_code(permission)
                .filter(|p| *p != AclPermission::Unknown)?,
        })
    }

    /// Whether the ACL `acl` is selected (Kafka's `AclBindingFilter.matches`).
    pub fn matches(&self, acl: &crate::image::StandardAcl) -> bool {
        self.matches_pattern(acl.resource_type, &acl.resource_name, acl.pattern_type)
            && self.principal.as_deref().is_none_or(|p| p == acl.principal)
            && self.host.as_deref().is_none_or(|h| h == acl.host)
            && (self.operation == AclOperation::Any || self.operation == acl.operation)
            && (self.permission == AclPermission::Any || self.permission == acl.permission)
    }

    /// Kafka's `ResourcePatternFilter.matches`.
    fn matches_pattern(
        &self,
        resource_type: ResourceType,
        name: &str,
        pattern: PatternType,
    ) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != resource_type {
            return false;
        }
        if !matches!(self.pattern_type, PatternType::Any | PatternType::Match)
            && self.pattern_type != pattern
        {
            return false;
        }
        let Some(wanted) = self.name.as_deref() else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == pattern {
            return wanted == name;
        }
        match pattern {
            PatternType::Literal => wanted == name || name == WILDCARD,
            PatternType::Prefixed => wanted.starts_with(name),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::StandardAcl;

    fn acl(name: &str, pattern: PatternType) -> StandardAcl {
        StandardAcl {
            resource_type: ResourceType::Topic,
            resource_name: name.into(),
            pattern_type: pattern,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission: AclPermission::Allow,
        }
    }

    #[test]
    fn filters_match_as_kafka_binding_filters() {
        let filter =
            |t: i8, name: Option<&str>, p: i8| AclFilter::from_codes(t, name, p, None, None, 1, 1);
        let literal = acl("orders", PatternType::Literal);
        let prefixed = acl("ord", PatternType::Prefixed);
        let wildcard = acl("*", PatternType::Literal);
        let any = filter(1, None, 1).filter(|f| f.matches(&literal) && f.matches(&prefixed));
        assert!(any.is_some());
        let exact = filter(2, Some("orders"), 3);
        assert!(exact
            .as_ref()
            .is_some_and(|f| f.matches(&literal) && !f.matches(&prefixed)));
        let by_name = filter(2, Some("orders"), 1);
        assert!(by_name
            .as_ref()
            .is_some_and(|f| f.matches(&literal) && !f.matches(&wildcard)));
        let matching = filter(1, Some("orders"), 2);
        assert!(matching
            .as_ref()
            .is_some_and(|f| f.matches(&literal) && f.matches(&prefixed) && f.matches(&wildcard)));
        assert!(filter(2, Some("other"), 2)
            .is_some_and(|f| !f.matches(&prefixed) && f.matches(&wildcard)));
        assert!(filter(3, None, 1).is_some_and(|f| !f.matches(&literal)));
        assert_eq!(filter(0, None, 1), None, "UNKNOWN resource type");
        assert_eq!(filter(2, None, 9), None, "not a pattern type code");
        let by_principal = AclFilter::from_codes(1, None, 1, Some("User:bob"), None, 1, 1);
        assert!(by_principal.is_some_and(|f| !f.matches(&literal)));
        let by_op = AclFilter::from_codes(1, None, 1, None, Some("*"), 4, 3);
        assert!(by_op.is_some_and(|f| !f.matches(&literal)));
    }

    #[test]
    fn codes_and_names_round_trip() {
        for &t in ResourceType::ALL_VALUES {
            assert_eq!(ResourceType::from_code(t.code()), Some(t));
            assert_eq!(ResourceType::from_name(&t.name().to_lowercase()), Some(t));
        }
        for &o in AclOperation::ALL_VALUES {
            assert_eq!(AclOperation::from_code(o.code()), Some(o));
        }
        assert_eq!(AclOperation::from_code(15), None);
        assert_eq!(
            AclOperation::from_name("describe_configs"),
            Some(AclOperation::DescribeConfigs)
        );
        assert_eq!(PatternType::from_code(4), Some(PatternType::Prefixed));
        assert_eq!(
            AclPermission::from_name("Allow"),
            Some(AclPermission::Allow)
        );
    }

    #[test]
    fn implied_operations_follow_kafka() {
        use AclOperation::*;
        for op in [Read, Write, Delete, Alter, Describe, All] {
            assert!(op.allow_grants(Describe), "{op}");
        }
        for op in [
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
        ] {
            assert!(!op.allow_grants(Describe), "{op}");
        }
        assert!(AlterConfigs.allow_grants(DescribeConfigs));
        assert!(!Alter.allow_grants(DescribeConfigs));
        assert!(!Read.allow_grants(Write));
        assert!(All.allow_grants(ClusterAction));
        assert!(!Read.deny_refuses(Describe));
        assert!(All.deny_refuses(Describe));
        assert_eq!(operation_bit(Read), 8);
        assert_eq!(operation_bit(DescribeTokens), 1 << 14);
    }
}
