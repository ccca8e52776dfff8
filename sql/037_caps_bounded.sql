-- Caps are bounded by a documented maximum (docs/operations.md, "Data and budgets"): an ε cap of at most 1000
-- (e^1000 bounds nothing; 1e308 was accepted, and with it every release) and a δ cap of at most 0.01 (0.999999 was
-- accepted). flows/cli/budget.py says the same in a sentence before the database refuses it.
ALTER TABLE governance.datasets DROP CONSTRAINT IF EXISTS datasets_caps_bounded;
ALTER TABLE governance.datasets ADD CONSTRAINT datasets_caps_bounded CHECK (
    epsilon_cap <= 1000 AND ldp_epsilon_cap <= 1000 AND pufferfish_epsilon_cap <= 1000 AND delta_cap <= 0.01
    AND coalesce(lifetime_epsilon_cap <= 1000, true) AND coalesce(lifetime_ldp_epsilon_cap <= 1000, true)
    AND coalesce(lifetime_pufferfish_epsilon_cap <= 1000, true)) NOT VALID;
DO $$
BEGIN  -- a cap set before this migration above the maximum is named, and refused at the dataset's next change
    ALTER TABLE governance.datasets VALIDATE CONSTRAINT datasets_caps_bounded;
EXCEPTION WHEN check_violation THEN
    RAISE WARNING 'datasets with a cap above the maximum (epsilon 1000, delta 0.01): %; set their caps with '
        '`trajpub budget cap`', (SELECT string_agg(dataset, ', ') FROM governance.datasets WHERE NOT (
            epsilon_cap <= 1000 AND ldp_epsilon_cap <= 1000 AND pufferfish_epsilon_cap <= 1000 AND delta_cap <= 0.01
            AND coalesce(lifetime_epsilon_cap <= 1000, true) AND coalesce(lifetime_ldp_epsilon_cap <= 1000, true)
            AND coalesce(lifetime_pufferfish_epsilon_cap <= 1000, true)));
END $$;
