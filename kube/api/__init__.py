"""The API object model: every kind declared once, typed, and all else derived from it.

``struct`` holds the declaration vocabulary, ``meta_v1`` the metadata every object carries,
``kinds`` one module per API group and version, ``scheme`` the registry of kinds.  From those
declarations come decoding and encoding (``codec``), defaulting and validation (``walk``),
server-side tables (``printing``) and OpenAPI schemas (``openapi``).  Quantities, label and field
selectors, names and object keys are exact, tested primitives beside them.
"""
