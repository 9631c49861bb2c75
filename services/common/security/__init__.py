"""Authentication and authorization on the Kafka listeners: SASL mechanisms and SCRAM credentials
(`sasl`), Kafka's ACL model (`acl`) and the authorizer that applies it (`authorizer`)."""
