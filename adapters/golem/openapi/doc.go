// Package openapi keeps its own request/response checker rather than
// kin-openapi's (github.com/getkin/kin-openapi, openapi3filter), for the
// reasons below. The description of what the checker checks follows
// (spec.go).
//
// # Why not kin-openapi
//
// The reason that decides it: this checker reports an object member that
// the schema does not declare: in our yagna client's requests or the
// devnet's answers such a member is almost always a misspelled field name.
// kin-openapi follows OpenAPI 3.0, where an object without
// additionalProperties accepts any member, and its schema validation
// options (openapi3.SchemaValidationOption: FailFast, MultiErrors,
// VisitAsRequest/VisitAsResponse, EnableFormatValidation,
// DisablePatternValidation, DisableReadOnlyValidation,
// DisableWriteOnlyValidation, DefaultsSet, SetSchemaErrorMessageCustomizer,
// SetOpenAPIMinorVersion) have no switch for it. Setting
// additionalProperties: false on every object of ya-client's specs (none
// sets it) would not do either: inside allOf each part sees only its own
// properties, so payment-api.yaml's DebitNoteRejectedEvent (allOf
// DebitNoteEvent {eventType, eventDate, debitNoteId} and {rejection}) would
// refuse every event: each part rejects the other's members. This checker counts what the allOf parts, the chosen oneOf
// branch or the discriminator's schema declare together (validate.go
// checkOwned).
//
// What would stay ours anyway, library or not, is most of check.go and
// checker.go: the errata patched into the raw specs before they are
// resolved (spec.go errata: yagna's AgreementListEntry, the GET of the
// terminate reason), RFC 7807 application/problem+json answers that the
// specs do not describe (CheckResponseOf, undocumentedProblems), 401 on
// every operation that requires the app key, the Exempt hook for the
// devnet's deliberate answers beyond the spec (X-Devnet-Beyond-Spec),
// websocket upgrades checked on the request side only, and the server middleware and
// client transport with their per-operation counts (Seen). The library would
// replace the schema walk (validate.go, about 380 lines) and bring some ten
// modules into a test-only package (its go.mod: gorilla/mux for routing,
// go-openapi/jsonpointer and swag, mailru/easyjson, perimeterx/marshmallow,
// oasdiff/yaml and yaml3, mohae/deepcopy, woodsbury/decimal128).
//
// santhosh-tekuri/jsonschema, the validator gcompose already uses for its
// own JSON (protocol/validate.go), checks JSON Schema, not OpenAPI 3.0
// schema objects: nullable, discriminator and the request/response meaning
// of readOnly and writeOnly are not its keywords. Its unevaluatedProperties
// (2019-09 and later) could express the strictness above, but only after
// every schema is translated to that dialect: a translator to write and keep
// instead of the walk we have.
package openapi
