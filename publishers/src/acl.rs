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

#[cfg(test)]
mod tests {
    use super::*;

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
