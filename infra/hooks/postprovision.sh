#!/bin/sh
# azd postprovision hook: App Service Authentication's sign-in redirect URI on the operators' app
# registration (see preprovision.sh), now that the Function App's host name is known.
set -eu

# The callback signing key (CALLBACK_SIGNING_KEYS, by Key Vault reference in the app settings):
# made once, here, never in a template; a later provision keeps it (rotation: docs/operations.md).
vault=$(azd env get-value KEY_VAULT_NAME 2>/dev/null || true)
secret=$(azd env get-value CALLBACK_KEYS_SECRET_NAME 2>/dev/null || echo callback-signing-keys)
if [ -n "$vault" ]; then
  if az keyvault secret show --vault-name "$vault" --name "$secret" --query id -o tsv >/dev/null 2>&1; then
    echo "postprovision: $secret exists in $vault, kept"
  else
    az keyvault secret set --vault-name "$vault" --name "$secret" \
      --value "k1:$(openssl rand -base64 32)" --query id -o tsv >/dev/null
    echo "postprovision: made $secret in $vault"
  fi
fi

app_id=$(azd env get-value OPERATOR_AUTH_CLIENT_ID 2>/dev/null || true)
if [ -z "$app_id" ]; then
  echo "postprovision: no OPERATOR_AUTH_CLIENT_ID, no operator sign-in to configure"
  exit 0
fi
uri=$(azd env get-value SERVICE_API_URI)
az ad app update --id "$app_id" --web-redirect-uris "$uri/.auth/login/aad/callback"
echo "postprovision: operators sign in at $uri/.auth/login/aad"
