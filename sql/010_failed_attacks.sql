-- An attack that errors or times out is recorded with its error (and blocks the release: the gate fails closed).
ALTER TABLE governance.audit_results ALTER COLUMN success_rate DROP NOT NULL,
    ALTER COLUMN ci_low DROP NOT NULL, ALTER COLUMN ci_high DROP NOT NULL,
    ALTER COLUMN baseline DROP NOT NULL, ALTER COLUMN risk DROP NOT NULL;
ALTER TABLE governance.audit_results ADD COLUMN IF NOT EXISTS error text;
ALTER TABLE governance.audit_results DROP CONSTRAINT IF EXISTS audit_results_measured_or_failed;
ALTER TABLE governance.audit_results ADD CONSTRAINT audit_results_measured_or_failed
    CHECK ((error IS NULL) = (success_rate IS NOT NULL));
