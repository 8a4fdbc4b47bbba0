"""Custom resources, as upstream's apiextensions-apiserver: the stores a CustomResourceDefinition
makes the server serve (``customresources``), their OpenAPI schemas (``schema``), conversion
between versions (``conversion``) and the CEL rules of schemas and admission policies
(``cel``)."""
