// Package config is the esjet node's configuration: the schema, its defaults,
// loading from a YAML file plus ESJET_* environment overrides, and validation that
// reports every problem at once.
//
// It sits at the very start of the data flow: cmd/node calls [Load] once, prints
// [Config.Redacted] when asked, and hands the validated [Config] to the broker
// (embedded nats-server or an external cluster) and to stream provisioning.
//
// The shipped file config/esjet.yaml lists every field with its default value and
// what is valid; a test keeps it equal to [Default].
//
// Precedence, lowest first: [Default], the YAML file, the environment. An environment
// variable is named ESJET_ followed by the field's YAML path upper-cased with dots
// turned into underscores (nats.embedded.data_dir → ESJET_NATS_EMBEDDED_DATA_DIR);
// lists are comma-separated. An ESJET_ variable that names no field is an error, so a
// typo cannot silently leave a default in place. ESJET_CONFIG is the one exception: it
// names the config file when no path is given. Both read a value alike (strict.go):
// a boolean is true or false, a whole number decimal digits, and every problem names
// the field's path.
package config
