#!/bin/sh
# azd postprovision hook: App Service Authentication's sign-in redirect URI on the operators' app
# registration (see preprovision.sh), now that the Function App's host name is known.
set -eu

app_id=$(azd env get-value OPERATOR_AUTH_CLIENT_ID 2>/dev/null || true)
if [ -z "$app_id" ]; then
  echo "postprovision: no OPERATOR_AUTH_CLIENT_ID, no operator sign-in to configure"
  exit 0
fi
uri=$(azd env get-value SERVICE_API_URI)
az ad app update --id "$app_id" --web-redirect-uris "$uri/.auth/login/aad/callback"
echo "postprovision: operators sign in at $uri/.auth/login/aad"
