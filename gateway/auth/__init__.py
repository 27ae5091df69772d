"""Who is calling: personal access tokens and owner passwords."""
