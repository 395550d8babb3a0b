package trip

// Evolve exposes the fold to the external tests, which check its purity.
var Evolve = evolve
