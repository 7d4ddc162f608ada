"""Everything printed: tables of fingerprints, failure explanations, the session report."""
